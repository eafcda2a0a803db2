"""Helpers for instance and OS tests against a real cluster.

Typical use::

    out = ok(cl.gnt("instance", "add", *NO_CHECKS, "-t", "diskless", ..., "inst1"))
    assert rows(cl, ["name", "status"], "inst1") == [["inst1", "running"]]
    env_os(cl.paths, "dummy", tmp_path)        # create/rename/verify dump their env
    env = read_env(tmp_path / "create-inst1")
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from corral.paths import Paths
from tests.helpers.cluster import Result, TestCluster
from tests.helpers.osdef import OK_SCRIPT, make_os

NO_CHECKS = ("--no-name-check", "--no-ip-check")
SEP = "|"


def ok(result: Result) -> str:
    """Assert success; returns stdout."""
    assert result.rc == 0, (result.rc, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout


def failed(result: Result, *texts: str, rc: int = 1) -> str:
    """Assert failure with ``rc`` and every one of ``texts`` in stderr; returns stderr."""
    assert result.rc == rc, (result.rc, result.stdout, result.stderr)
    for text in texts:
        assert text in result.stderr, (text, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr


def add(cl: TestCluster, name: str, *args: str) -> Result:
    """``gnt-instance add`` with the name checks off (the names are not in DNS)."""
    return cl.gnt("instance", "add", *NO_CHECKS, *args, name)


def rows(cl: TestCluster, fields: list[str], *names: str) -> list[list[str]]:
    """``gnt-instance list`` of ``fields`` as text cells, one row per instance.

    With ``names``, only those instances' rows (absent ones simply have none:
    naming an unknown instance on the command line is an error).
    """
    out = ok(
        cl.gnt(
            "instance",
            "list",
            "--no-headers",
            f"--separator={SEP}",
            "-o",
            ",".join(["name", *fields]),
        )
    )
    cells = [line.split(SEP) for line in out.splitlines()]
    return [row[1:] for row in cells if not names or row[0] in names]


def query(cl: TestCluster, fields: list[str], *names: str) -> dict[str, dict[str, Any]]:
    """Typed field values by instance name (Query over luxi)."""
    with cl.client() as client:
        result = client.query("instance", ["name", *fields], None)
    return {
        row[0][1]: {f: c[1] for f, c in zip(fields, row[1:], strict=True)}
        for row in result["data"]
        if not names or row[0][1] in names
    }


def config_serial(cl: TestCluster) -> int:
    with cl.client() as client:
        return int(client.call("QueryConfigValues", ["config_serial"])[0])


def fake_state_dir(cl: TestCluster) -> Path:
    return cl.paths.run_dir / "fake-hypervisor"


def fake_state(cl: TestCluster, name: str) -> dict[str, Any] | None:
    """The fake hypervisor's state of a running instance (None: not running)."""
    path = fake_state_dir(cl) / name
    return json.loads(path.read_text()) if path.exists() else None


def disk_dir(cl: TestCluster, name: str) -> Path:
    return cl.paths.file_storage_dir / name


def disk_files(cl: TestCluster, name: str) -> list[Path]:
    """An instance's disk files, in disk order."""
    directory = disk_dir(cl, name)
    if not directory.exists():
        return []
    return sorted(directory.iterdir(), key=lambda p: p.name.rsplit("disk", 1)[1])


def files_under(*directories: Path) -> dict[str, int]:
    """Every file below ``directories`` with its size (for "nothing changed")."""
    out: dict[str, int] = {}
    for directory in directories:
        if directory.exists():
            for path in directory.rglob("*"):
                if path.is_file():
                    out[str(path)] = path.stat().st_size
    return out


def dump_script(out: Path, kind: str) -> str:
    """A script that writes its environment and arguments to ``out/<kind>-<instance>``."""
    target = f"{out}/{kind}-${{INSTANCE_NAME:-parameters}}"
    return f'#!/bin/sh\nenv > "{target}"\necho "ARGS=$*" >> "{target}"\nexit 0\n'


def env_os(paths: Paths, name: str, out: Path, **kwargs: Any) -> Path:
    """An OS whose create, rename and verify scripts record their environment in ``out``
    (create also records a reinstall: ``create-<instance>``)."""
    scripts = {k: dump_script(out, k) for k in ("create", "rename", "verify")}
    scripts["export"] = scripts["import"] = OK_SCRIPT
    scripts.update(kwargs.pop("scripts", {}))
    return make_os(paths, name, scripts=scripts, **kwargs)


def read_env(path: Path) -> dict[str, str]:
    """``KEY=value`` lines (as ``env`` prints them) as a dict."""
    out = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key] = value
    return out
