"""An instance is added fully or not at all: a failing pre hook, a failing OS
``create`` script and a failing ``verify`` each leave nothing behind (no disk
file, no config entry, no running instance), and the error says why, with
the script's or hook's own output."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cluster import Result, TestCluster, running_cluster
from tests.helpers.osdef import make_os

VERIFY_MESSAGE = "greeting 'rude' is not an acceptable greeting"


def noisy_create(record: Path) -> str:
    """Notes that its disk exists, prints 30 numbered lines, fails."""
    return (
        "#!/bin/sh\n"
        f'test -f "$DISK_0_PATH" && echo "$DISK_0_PATH" > "{record}"\n'
        'for i in $(seq 1 30); do echo "create output line $i."; done\n'
        "exit 1\n"
    )


REFUSING_VERIFY = (
    f'#!/bin/sh\nif [ "$OSP_GREETING" = rude ]; then\n  echo "{VERIFY_MESSAGE}" >&2\n  exit 1\nfi\n'
)


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    base = tmp_path_factory.mktemp("atomic")
    with running_cluster(base) as cluster:
        params = {"greeting": "a greeting"}
        make_os(cluster.paths, "goodos", parameters=params)
        make_os(
            cluster.paths,
            "failcreate",
            parameters=params,
            scripts={"create": noisy_create(base / "create-saw-disk")},
        )
        make_os(cluster.paths, "failverify", parameters=params, scripts={"verify": REFUSING_VERIFY})
        yield cluster


@pytest.fixture
def serial(cl: TestCluster) -> Iterator[int]:
    """The config serial before the test; the hooks are removed afterwards."""
    yield config_serial(cl)
    shutil.rmtree(cl.paths.hooks_dir, ignore_errors=True)


def config_serial(cl: TestCluster) -> int:
    with cl.client() as client:
        return int(client.call("QueryConfigValues", ["config_serial"])[0])


def add(cl: TestCluster, name: str, os_name: str, greeting: str = "hello") -> Result:
    return cl.gnt(
        "instance",
        "add",
        "-t",
        "file",
        "--disk",
        "0:size=32m",
        "-o",
        f"{os_name}+default",
        "-O",
        f"greeting={greeting}",
        "--no-name-check",
        "--no-ip-check",
        name,
    )


def last_job(cl: TestCluster) -> list[Any]:
    with cl.client() as client:
        rows = client.query_jobs(None, ["id", "status", "summary", "opresult"])
    return list(rows[-1])


def config_instances(cl: TestCluster) -> list[str]:
    """The instance rows of the configuration database, read directly."""
    db = sqlite3.connect(f"file:{cl.paths.config_db}?mode=ro", uri=True)
    try:
        return [row[0] for row in db.execute("SELECT name FROM instances")]
    finally:
        db.close()


def assert_nothing_left(cl: TestCluster, name: str, serial: int) -> None:
    storage = cl.paths.file_storage_dir
    assert not list(storage.rglob("*")), f"left in {storage}: {list(storage.rglob('*'))}"
    listing = cl.gnt("instance", "list", "--no-headers", "-o", "name")
    assert listing.rc == 0, listing.stderr
    assert listing.stdout.split() == []
    with cl.client() as client:
        assert client.query("instance", ["name"])["data"] == []
    assert config_instances(cl) == []
    assert config_serial(cl) == serial
    state_dir = cl.paths.run_dir / "fake-hypervisor"
    assert not (state_dir / name).exists()
    assert not state_dir.exists() or not list(state_dir.iterdir())


def assert_failed(result: Result, *texts: str) -> None:
    assert result.rc == 1, (result.rc, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    for text in texts:
        assert text in result.stderr, (text, result.stderr)


def test_failing_pre_hook_leaves_nothing(cl: TestCluster, serial: int) -> None:
    cl.hook(
        "instance-add",
        "pre",
        "10-refuse",
        '#!/bin/sh\necho "policy refuses $GANETI_INSTANCE_NAME"\nexit 1\n',
    )
    name = "hooked.example.com"
    result = add(cl, name, "goodos")
    assert_failed(
        result,
        "hooks execution failed",
        f"node: {cl.node_name}",
        "instance-add-pre.d/10-refuse",
        f"policy refuses {name}",
    )
    job_id, status, summary, _ = last_job(cl)
    assert (status, summary) == ("error", [f"INSTANCE_CREATE({name})"])
    info = cl.gnt("job", "info", str(job_id))
    assert "instance-add-pre.d/10-refuse" in info.stdout
    assert f"policy refuses {name}" in info.stdout
    assert_nothing_left(cl, name, serial)


def test_failing_create_leaves_nothing_and_shows_the_output_tail(
    cl: TestCluster, serial: int
) -> None:
    name = "badcreate.example.com"
    result = add(cl, name, "failcreate")
    assert_failed(result, "OS create script failed (exit code 1)", name)
    # The disk was there while create ran, and is gone now.
    record = cl.paths.root.parent / "create-saw-disk"
    assert record.read_text().strip().startswith(f"{cl.paths.file_storage_dir}/{name}/")
    _, status, _, opresult = last_job(cl)
    assert status == "error"
    ((error_class, (message, *_)),) = opresult
    assert error_class == "OpExecError"
    for text in (result.stderr, message):
        for line in range(11, 31):
            assert f"create output line {line}." in text, (line, text)
        for line in range(1, 11):
            assert f"create output line {line}." not in text, (line, text)
    assert_nothing_left(cl, name, serial)


def test_failing_verify_leaves_nothing_and_shows_its_message(cl: TestCluster, serial: int) -> None:
    name = "badverify.example.com"
    result = add(cl, name, "failverify", greeting="rude")
    assert_failed(result, "prerequisites not met", "failverify", VERIFY_MESSAGE)
    job_id, status, _, _ = last_job(cl)
    assert status == "error"
    info = cl.gnt("job", "info", str(job_id))
    assert VERIFY_MESSAGE in info.stdout
    assert_nothing_left(cl, name, serial)


def test_a_good_add_after_the_failures_works(cl: TestCluster, serial: int) -> None:
    """The failures left no lock, name or disk that would stand in the way."""
    for name in ("hooked.example.com", "badcreate.example.com", "badverify.example.com"):
        result = add(cl, name, "goodos")
        assert result.rc == 0, result.stderr
    listing = cl.gnt("instance", "list", "--no-headers", "-o", "name,status")
    assert sorted(listing.stdout.split()) == sorted(
        ["badcreate.example.com", "badverify.example.com", "hooked.example.com"] + ["running"] * 3
    )
    for name in ("hooked.example.com", "badcreate.example.com", "badverify.example.com"):
        assert cl.gnt("instance", "remove", "-f", name).rc == 0
    assert_nothing_left(cl, "hooked.example.com", config_serial(cl))
