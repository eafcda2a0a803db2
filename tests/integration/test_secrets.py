"""Secret and private OS parameters, end to end with real daemons.

A secret (``--os-parameters-secret``) reaches the OS scripts and nothing
else: no file under the cluster root holds it (config and queue databases
with their WAL files, logs, ssconf, hooks logs).  A private value
(``--os-parameters-private``) is stored but shown only as ``<redacted>``:
in ``gnt-instance info``, in ``gnt-job info`` and never in the logs.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.osdef import make_os

OS = "secretos"
INSTANCE = "secret1.example.com"
REDACTED = "<redacted>"


@dataclass
class Setup:
    cl: TestCluster
    secret: str
    private: str
    record: Path  # outside the root: what the scripts saw
    jobs: dict[str, int]
    test_osparams: str  # what gnt-debug test-osparams printed


def recording_script(record: Path, kind: str) -> str:
    """Appends the sha256 of OSP_TOKEN (never the value) to ``<record>/<kind>``;
    prints nothing, so its log holds nothing either."""
    return (
        "#!/bin/sh\n"
        f'printf %s "$OSP_TOKEN" | sha256sum | cut -d" " -f1 >> "{record}/{kind}"\n'
        f'printf %s "$OSP_NOTE" | sha256sum | cut -d" " -f1 >> "{record}/{kind}-note"\n'
    )


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    base = tmp_path_factory.mktemp("secrets")
    record = base / "record"
    record.mkdir()
    secret = f"S3CR3T-{secrets.token_hex(12)}"
    private = f"PR1V4TE-{secrets.token_hex(12)}"
    with running_cluster(base) as cl:
        make_os(
            cl.paths,
            OS,
            parameters={"token": "a secret token", "note": "a private note", "greeting": "hi"},
            scripts={
                "create": recording_script(record, "create"),
                "verify": recording_script(record, "verify"),
            },
        )
        add = cl.gnt(
            "instance",
            "add",
            "-t",
            "file",
            "--disk",
            "0:size=16m",
            "-o",
            f"{OS}+default",
            "-O",
            "greeting=hello",
            "--os-parameters-private",
            f"note={private}",
            "--os-parameters-secret",
            f"token={secret}",
            "--no-name-check",
            "--no-ip-check",
            "--no-start",
            INSTANCE,
        )
        assert add.rc == 0, add.stderr
        reinstall = cl.gnt(
            "instance", "reinstall", "-f", "--os-parameters-secret", f"token={secret}", INSTANCE
        )
        assert reinstall.rc == 0, reinstall.stderr
        shown = cl.gnt("debug", "test-osparams", "--os-parameters-secret", f"token={secret}")
        assert shown.rc == 0, shown.stderr
        with cl.client() as client:
            rows = client.query_jobs(None, ["id", "summary"])
        jobs = {}
        for job_id, (summary,) in rows:
            for kind in ("INSTANCE_CREATE", "INSTANCE_REINSTALL"):
                if summary.startswith(kind):
                    jobs[kind] = job_id
        assert set(jobs) == {"INSTANCE_CREATE", "INSTANCE_REINSTALL"}, rows
        yield Setup(cl, secret, private, record, jobs, shown.stdout)


def files_holding(root: Path, value: str) -> list[Path]:
    """Every regular file below ``root`` whose bytes contain ``value``."""
    needle = value.encode()
    return [
        path
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink() and needle in path.read_bytes()
    ]


def test_the_scripts_got_the_secret(setup: Setup) -> None:
    # verify and create at add, verify and create at reinstall: all with the secret.
    for kind in ("create", "verify"):
        assert (setup.record / kind).read_text().split() == [sha256(setup.secret)] * 2, kind
        assert (setup.record / f"{kind}-note").read_text().split() == [sha256(setup.private)] * 2


def test_no_file_under_the_root_holds_the_secret(setup: Setup) -> None:
    paths = setup.cl.paths
    wal_files = [paths.config_db.with_name(paths.config_db.name + "-wal")]
    wal_files.append(paths.queue_db.with_name(paths.queue_db.name + "-wal"))
    assert all(f.is_file() for f in wal_files)  # searched while the daemons run
    assert list((paths.log_dir / "os").glob("add-*.log")), "the OS logs are searched too"
    assert files_holding(paths.root, setup.secret) == []


def test_test_osparams_shows_the_secret_parameters_redacted(setup: Setup) -> None:
    # Ganeti's LUTestOsParams writes the values into the job's log; Corral's
    # job log scrubs them, as it does everything (its log is on disk).
    assert f"Secret OS parameters: {{'token': '{REDACTED}'}}" in setup.test_osparams
    assert setup.secret not in setup.test_osparams


def test_test_osparams_needs_secret_parameters(setup: Setup) -> None:
    result = setup.cl.gnt("debug", "test-osparams")
    assert result.rc == 1
    assert "Opcode needs secret parameters" in result.stderr


def test_the_private_value_is_stored(setup: Setup) -> None:
    # Private is not secret: the instance keeps it (for reinstalls), in the config.
    assert files_holding(setup.cl.paths.data_dir, setup.private)


def test_the_logs_never_show_the_private_value(setup: Setup) -> None:
    assert files_holding(setup.cl.paths.log_dir, setup.private) == []


def test_instance_info_redacts_the_private_value(setup: Setup) -> None:
    info = setup.cl.gnt("instance", "info", INSTANCE)
    assert info.rc == 0, info.stderr
    assert f"note: {REDACTED}" in info.stdout
    assert "greeting: hello" in info.stdout
    assert setup.private not in info.stdout and setup.secret not in info.stdout
    # The secret was never stored, so the instance does not know it at all.
    assert "token" not in info.stdout


@pytest.mark.parametrize("kind", ["INSTANCE_CREATE", "INSTANCE_REINSTALL"])
def test_job_info_redacts_private_and_secret(setup: Setup, kind: str) -> None:
    info = setup.cl.gnt("job", "info", str(setup.jobs[kind]))
    assert info.rc == 0, info.stderr
    assert setup.private not in info.stdout and setup.secret not in info.stdout
    # Ganeti's layout: a parameter dict is a nested block of "key: value" lines.
    assert f"osparams_secret: \n          token: {REDACTED}\n" in info.stdout
    if kind == "INSTANCE_CREATE":
        assert f"osparams_private: \n          note: {REDACTED}\n" in info.stdout
        assert "osparams: \n          greeting: hello\n" in info.stdout


def test_luxi_job_queries_redact_too(setup: Setup) -> None:
    with setup.cl.client() as client:
        answer = client.query_jobs(list(setup.jobs.values()), ["ops", "opresult", "oplog"])
    text = json.dumps(answer)
    assert setup.secret not in text and setup.private not in text
    assert REDACTED in text


def test_nothing_holds_the_secret_after_the_daemons_stopped(setup: Setup) -> None:
    # Last: stopping checkpoints the SQLite WAL files into the databases.
    setup.cl.stop()
    assert files_holding(setup.cl.paths.root, setup.secret) == []
    assert files_holding(setup.cl.paths.log_dir, setup.private) == []


def test_a_script_quoting_the_secret_does_not_put_it_on_disk(tmp_path: Path) -> None:
    """A verify script that refuses a secret and echoes it: the user sees the
    refusal with the value redacted, and the value is still in no file."""
    secret = f"S3CR3T-{secrets.token_hex(12)}"
    with running_cluster(tmp_path) as cl:
        make_os(
            cl.paths,
            "quoting",
            parameters={"token": "a secret"},
            scripts={"verify": '#!/bin/sh\necho "refused token $OSP_TOKEN" >&2\nexit 1\n'},
        )
        result = cl.gnt(
            "instance",
            "add",
            "-t",
            "diskless",
            "-o",
            "quoting+default",
            "--no-start",
            "--os-parameters-secret",
            f"token={secret}",
            "--no-name-check",
            "--no-ip-check",
            "quoted.example.com",
        )
        assert result.rc == 1
        assert f"refused token {REDACTED}" in result.stderr
        assert secret not in result.stderr
        assert files_holding(cl.paths.root, secret) == []
