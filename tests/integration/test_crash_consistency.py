"""kill -9 of masterd or noded in the middle of an instance add leaves nothing.

The add is stopped at a gate: its OS create script (run after the disk file
is made) says it started, then waits on a FIFO the test controls.  Whatever
is killed there, once the daemons run again no orphan is left anywhere: no
disk file, no instance in the config, no record of the add, a clean
``gnt-cluster verify``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.process.daemons import start_daemon
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.crash import UNCLEAN_SHUTDOWN, intent_records, kill_9, verify_findings
from tests.helpers.gate import Gate
from tests.helpers.instances import add, files_under, ok, rows
from tests.helpers.jobs import wait_final
from tests.helpers.osdef import make_os
from tests.helpers.waiting import wait_until

NAME = "crash1.example.com"


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[tuple[TestCluster, Gate]]:
    gate = Gate.make(tmp_path)
    with running_cluster(tmp_path) as cl:
        make_os(cl.paths, "gated", variants=None, scripts={"create": gate.script()})
        try:
            yield cl, gate
        finally:
            gate.release()


def submit_add(cl: TestCluster) -> int:
    """An add through luxi; returns once its disk file exists and the gate holds it."""
    with cl.client() as client:
        job = client.submit_job(
            [
                {
                    "OP_ID": "OP_INSTANCE_CREATE",
                    "instance_name": NAME,
                    "mode": "create",
                    "disk_template": "file",
                    "disks": [{"size": 4}],
                    "nics": [],
                    "os_type": "gated",
                    "name_check": False,
                    "ip_check": False,
                    "start": False,
                }
            ]
        )
    return job


def kill(cl: TestCluster, daemon: str) -> None:
    kill_9(cl.paths.pid_file(daemon))


def start(cl: TestCluster, daemon: str) -> None:
    args = ["--bind", cl.node_ip, "--port", str(cl.port)] if daemon == "noded" else []
    start_daemon([sys.executable, "-m", f"corral.daemons.{daemon}", *args], cl.env, timeout=30)


def storage_files(cl: TestCluster) -> dict[str, int]:
    return files_under(cl.paths.file_storage_dir)


def assert_no_orphan(cl: TestCluster, *instances: str) -> None:
    """Only ``instances`` exist: in the config, their disks alone, verify clean."""
    assert [row[0] for row in rows(cl, ["name"])] == list(instances)
    rc, findings = verify_findings(cl)
    assert rc == 0 and not findings, findings
    assert intent_records(cl) == []


def test_kill_9_masterd_mid_add_leaves_no_orphan(gated: tuple[TestCluster, Gate]) -> None:
    cl, gate = gated
    job = submit_add(cl)
    wait_until(gate.started.exists, 30, "the create script running")
    assert len(storage_files(cl)) == 1 and len(intent_records(cl)) == 1
    kill(cl, "corral-masterd")
    start(cl, "masterd")
    # Settled at start-up: the disk goes while the old script still waits.
    wait_until(lambda: not storage_files(cl), 30, "the disk file removed")
    gate.release()
    with cl.client() as client:
        ((status, result),) = wait_final(client, [job], ("opresult",))
    assert status == "error" and UNCLEAN_SHUTDOWN in str(result), result
    assert_no_orphan(cl)
    # The name is free and works.
    ok(add(cl, NAME, "-t", "file", "--disk", "0:size=4m", "--no-install", "--no-start"))
    assert len(storage_files(cl)) == 1
    assert_no_orphan(cl, NAME)


def kill_noded_mid_add(cl: TestCluster, gate: Gate) -> None:
    """The add fails for lack of its node; its disk stays, recorded, until noded is back."""
    job = submit_add(cl)
    wait_until(gate.started.exists, 30, "the create script running")
    kill(cl, "corral-noded")
    gate.release()  # the orphaned script ends
    with cl.client() as client:
        ((status, log),) = wait_final(client, [job], ("oplog",))
    assert status == "error"
    assert "Could not remove disk" in str(log), log
    assert len(storage_files(cl)) == 1 and len(intent_records(cl)) == 1


def test_kill_9_noded_mid_add_then_the_disk_goes_when_noded_is_back(
    gated: tuple[TestCluster, Gate],
) -> None:
    cl, gate = gated
    kill_noded_mid_add(cl, gate)
    start(cl, "noded")
    # masterd retries in the background (backing off to 15 s between attempts).
    wait_until(lambda: not storage_files(cl) and not intent_records(cl), 60, "the disk removed")
    assert_no_orphan(cl)


def test_kill_9_noded_mid_add_then_the_next_add_of_the_name_cleans_up(
    gated: tuple[TestCluster, Gate],
) -> None:
    cl, gate = gated
    kill_noded_mid_add(cl, gate)
    (old,) = storage_files(cl)
    start(cl, "noded")
    ok(add(cl, NAME, "-t", "file", "--disk", "0:size=4m", "--no-install", "--no-start"))
    (new,) = storage_files(cl)
    assert new != old
    assert_no_orphan(cl, NAME)
