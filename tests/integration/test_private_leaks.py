"""Private and secret OS parameters printed by failing OS scripts, end to end.

The OS scripts here print every parameter they get (``OSP_*``) to stdout and
stderr, then fail.  Adds, reinstalls and renames run them, through the gnt-*
commands and through luxi, with private values given in the opcode and with
private values the instance has in the configuration.  Afterwards neither a
private nor a secret value is in any command's output, any luxi answer, or
any file under the cluster root (queue and config databases with their WAL
files, OS logs, daemon logs), also after the jobs are archived.  The one
place a private value may be is where it is stored on purpose: as the value
of its key in the instance's and the opcode's parameters.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers.cluster import Result, TestCluster, running_cluster
from tests.helpers.instances import NO_CHECKS
from tests.helpers.jobs import wait_final
from tests.helpers.osdef import make_os

OS = "leaky"
REDACTED = "<redacted>"


def printing_script(flag: Path) -> str:
    """Prints all its OS parameters to stdout and stderr; fails while ``flag`` exists."""
    return (
        "#!/bin/sh\n"
        'env | grep "^OSP_"\n'
        'echo "note is $OSP_NOTE, token is $OSP_TOKEN" >&2\n'
        f'if [ -e "{flag}" ]; then exit 1; fi\n'
    )


@dataclass
class Leaks:
    cl: TestCluster
    private: str
    secret: str
    flag: Path
    outputs: list[str] = field(default_factory=list)

    def gnt(self, command: str, *args: str) -> Result:
        result = self.cl.gnt(command, *args)
        self.outputs += [result.stdout, result.stderr]
        return result

    def add(self, name: str, *extra: str) -> Result:
        return self.gnt(
            "instance",
            "add",
            *NO_CHECKS,
            "-t",
            "file",
            "--disk",
            "0:size=4m",
            "-o",
            f"{OS}+default",
            "--no-start",
            "-O",
            "greeting=hello",
            "--os-parameters-private",
            f"note={self.private}",
            "--os-parameters-secret",
            f"token={self.secret}",
            *extra,
            name,
        )


def occurrences(data: bytes, needle: bytes, allowed: tuple[bytes, ...]) -> list[bytes]:
    """The surroundings of each occurrence of ``needle`` not preceded by an ``allowed`` prefix."""
    return [
        data[max(m.start() - 60, 0) : m.end() + 20]
        for m in re.finditer(re.escape(needle), data)
        if not data[: m.start()].endswith(allowed)
    ]


def leaks_under(root: Path, value: str, allowed: tuple[bytes, ...] = ()) -> dict[str, list[bytes]]:
    """Every file below ``root`` holding ``value`` other than after an ``allowed`` prefix."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            hits = occurrences(path.read_bytes(), value.encode(), allowed)
            if hits:
                found[str(path)] = hits
    return found


# A private value is stored as the value of its key (config, job input): there only.
STORED = (b'"note":"', b'"note": "')


def assert_no_leak(leaks: Leaks) -> None:
    root = leaks.cl.paths.root
    assert leaks_under(root, leaks.secret) == {}
    assert leaks_under(root, leaks.private, STORED) == {}
    for text in leaks.outputs:
        assert leaks.secret not in text and leaks.private not in text, text


@pytest.fixture(scope="module")
def leaks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Leaks]:
    base = tmp_path_factory.mktemp("leaks")
    flag = base / "fail"
    with running_cluster(base) as cl:
        script = printing_script(flag)
        make_os(
            cl.paths,
            OS,
            parameters={"token": "secret", "note": "private", "greeting": "public"},
            scripts={"create": script, "rename": script, "verify": printing_script(base / "no")},
        )
        yield Leaks(cl, f"PR1V-{secrets.token_hex(10)}", f"S3CR-{secrets.token_hex(10)}", flag)


@pytest.fixture(scope="module")
def exercised(leaks: Leaks) -> Leaks:
    """Every way the scripts run, each failing once, through the commands and luxi."""
    leaks.flag.touch()
    failed = leaks.add("fail1.example.com")
    assert failed.rc == 1 and "OS create script failed" in failed.stderr, failed.stderr
    assert f"note is {REDACTED}, token is {REDACTED}" in failed.stderr
    # An instance whose private value is in the config: reinstall and rename see it.
    leaks.flag.unlink()
    assert leaks.add("keep.example.com").rc == 0
    leaks.flag.touch()
    reinstall = leaks.gnt(
        "instance", "reinstall", "-f", "--os-parameters-secret", f"token={leaks.secret}",
        "keep.example.com",
    )  # fmt: skip
    assert reinstall.rc == 1 and f"OSP_NOTE={REDACTED}" in reinstall.stderr, reinstall.stderr
    rename = leaks.gnt(
        "instance", "rename", "--force", *NO_CHECKS, "keep.example.com", "kept.example.com"
    )
    # A failed rename script is a warning, in the job's log (printed to stdout).
    assert rename.rc == 0 and "Could not run OS rename script" in rename.stdout, rename
    assert f"OSP_NOTE={REDACTED}" in rename.stdout
    with leaks.cl.client() as client:
        create = client.submit_job([luxi_create(leaks, "fail2.example.com")])
        reinstall_job = client.submit_job(
            [
                {
                    "OP_ID": "OP_INSTANCE_REINSTALL",
                    "instance_name": "kept.example.com",
                    "osparams_private": {"note": leaks.private},
                    "osparams_secret": {"token": leaks.secret},
                }
            ]
        )
        rows = wait_final(client, [create, reinstall_job], ("opresult", "oplog"))
    assert [row[0] for row in rows] == ["error", "error"], rows
    text = json.dumps(rows)
    assert REDACTED in text
    leaks.outputs.append(text)
    return leaks


def luxi_create(leaks: Leaks, name: str) -> dict[str, object]:
    return {
        "OP_ID": "OP_INSTANCE_CREATE",
        "instance_name": name,
        "mode": "create",
        "disk_template": "file",
        "disks": [{"size": 4}],
        "nics": [],
        "os_type": f"{OS}+default",
        "name_check": False,
        "ip_check": False,
        "start": False,
        "osparams": {"greeting": "hello"},
        "osparams_private": {"note": leaks.private},
        "osparams_secret": {"token": leaks.secret},
    }


def test_scripts_printing_hidden_values_leak_them_nowhere(exercised: Leaks) -> None:
    leaks = exercised
    paths = leaks.cl.paths
    # The values did reach the scripts: their logs show them redacted.
    os_logs = sorted((paths.log_dir / "os").glob("*.log"))
    kinds = {log.name.split("-", 1)[0] for log in os_logs}
    assert {"add", "rename", "verify"} <= kinds, kinds
    assert any(f"OSP_NOTE={REDACTED}" in log.read_text() for log in os_logs)
    with leaks.cl.client() as client:
        ids = [row[0] for row in client.query_jobs(None, ["id"])]
        leaks.outputs.append(json.dumps(client.query_jobs(ids, ["ops", "opresult", "oplog"])))
    listing = leaks.gnt("job", "info", *map(str, ids))
    assert listing.rc == 0 and REDACTED in listing.stdout
    assert_no_leak(leaks)
    # Archived: the same jobs, moved to the archive tables.
    assert leaks.gnt("job", "archive", *map(str, ids)).rc == 0
    archived = leaks.gnt("job", "info", *map(str, ids))
    assert archived.rc == 0 and REDACTED in archived.stdout
    assert_no_leak(leaks)
    # Stopped: the WAL files are checkpointed into the databases.
    leaks.cl.stop()
    assert_no_leak(leaks)
