"""masterd killed (kill -9) in the middle of a move, an export and a
failover: once it runs again, what the operation left is finished or undone
(the instance runs again, the target's copies are gone, nothing is left and
``gnt-cluster verify`` is clean).  Where a node cannot be reached yet, verify
reports what is left there until it can.  (A migration's copies: see
test_kvm_migration.py, the only hypervisor that copies disks.)

The operations are held at gates: exports of the source node pause after
their first frame (``test_impexp_gate``) and the fake hypervisor's start
waits on a gate file; masterd is killed once the job log or the gate says
the operation got there.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.process.daemons import start_daemon
from tests.helpers.backup import NODE1, NODE2, Bed, export_op, fill_disks, job_log, node_call
from tests.helpers.crash import (
    MASTERD,
    UNCLEAN_SHUTDOWN,
    arm_hv_gate,
    intent_records,
    kill_9,
    start_masterd,
    verify_findings,
    wait_reached,
)
from tests.helpers.instances import add, ok, rows
from tests.helpers.jobs import wait_final
from tests.helpers.multinode import cluster_with_nodes
from tests.helpers.noded import Noded, daemon_env, noded_cmd
from tests.helpers.osdef import make_os
from tests.helpers.waiting import wait_until

NODE3 = "node3.example.com"
DUMP = '#!/bin/bash\nstat -c %s "$EXPORT_DEVICE" >&"$EXP_SIZE_FD"\nexec cat "$EXPORT_DEVICE"\n'


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    with cluster_with_nodes(tmp_path_factory.mktemp("leftovers"), (NODE2, NODE3)) as (cl, extra):
        bed = Bed(cl, extra)
        for node in bed.nodes:  # the same OSes everywhere: verify checks it
            make_os(bed.paths(node), "plain", variants=None)
            make_os(bed.paths(node), "dumper", variants=None, scripts={"export": DUMP})
        yield bed


@pytest.fixture
def gate(bed: Bed) -> Iterator[Noded]:
    """node1 (every test's source) pauses its exports after their first frame."""
    source = bed.nodes[NODE1]
    node_call(source, "test_impexp_gate", True)
    try:
        yield source
    finally:
        node_call(source, "test_impexp_gate", False)


def new_instance(bed: Bed, name: str, *args: str) -> list[bytes]:
    """A running instance on node1; the contents written over its disks."""
    ok(add(bed.cl, name, "-o", "dumper", "--no-install", "-n", NODE1, *args))
    return fill_disks(bed, name)


def submit(bed: Bed, op: dict[str, Any]) -> int:
    with bed.cl.client() as client:
        return int(client.submit_job([op]))


def interrupt(bed: Bed, op: dict[str, Any]) -> int:
    """Submit ``op``, kill masterd once it sends its first disk data; its job."""
    job_id = submit(bed, op)
    wait_until(
        lambda: any(x.startswith("disk/0 sent") for x in job_log(bed, job_id)),
        timeout=60,
        what="the first disk data sent",
    )
    kill_9(bed.cl.paths.pid_file(MASTERD))
    return job_id


def assert_unclean_end(bed: Bed, job_id: int) -> None:
    with bed.cl.client() as client:
        ((status, result),) = wait_final(client, [job_id], ("opresult",), timeout=60)
    assert status == "error" and UNCLEAN_SHUTDOWN in json.dumps(result), result


def assert_nothing_left(bed: Bed) -> None:
    assert intent_records(bed.cl) == []
    rc, found = verify_findings(bed.cl)
    assert rc == 0 and found == [], found


def new_dir(bed: Bed, node: str, name: str) -> Path:
    return bed.paths(node).export_dir / f"{name}.new"


def where(bed: Bed, name: str) -> dict[str, str]:
    """node → the instance's fake-hypervisor state there."""
    states = {node: bed.hv_state(node, name) for node in bed.nodes}
    return {node: state for node, state in states.items() if state is not None}


def pnode(bed: Bed, name: str) -> str:
    return str(rows(bed.cl, ["pnode"], name)[0][0])


def restart_noded(node: Noded) -> None:
    start_daemon(noded_cmd(node.address, node.port), daemon_env(node.paths), timeout=30)


@pytest.mark.slow
def test_move_undone(bed: Bed, gate: Noded) -> None:
    contents = new_instance(bed, "cmv1", "-t", "file", "--disk=0:size=32m")
    job_id = interrupt(bed, {"OP_ID": "OP_INSTANCE_MOVE", "instance_name": "cmv1",
                             "target_node": NODE2})  # fmt: skip
    # Stopped for the copy; the target's copy half written.
    assert where(bed, "cmv1") == {} and len(bed.disk_files(NODE2, "cmv1")) == 1
    start_masterd(bed.cl)
    wait_until(
        lambda: where(bed, "cmv1") == {NODE1: "running"} and not bed.disk_files(NODE2, "cmv1"),
        timeout=60,
        what="cmv1 running on node1 again, its copy on node2 gone",
    )
    assert_unclean_end(bed, job_id)
    assert pnode(bed, "cmv1") == NODE1
    assert [p.read_bytes() for p in bed.disk_files(NODE1, "cmv1")] == contents
    assert_nothing_left(bed)
    node_call(gate, "test_impexp_gate", False)
    # Nothing stands in the way of the move now.
    ok(bed.cl.gnt("instance", "move", "-f", "-n", NODE2, "cmv1"))
    assert pnode(bed, "cmv1") == NODE2 and where(bed, "cmv1") == {NODE2: "running"}
    assert [p.read_bytes() for p in bed.disk_files(NODE2, "cmv1")] == contents
    ok(bed.cl.gnt("instance", "remove", "-f", "cmv1"))


@pytest.mark.slow
def test_export_undone(bed: Bed, gate: Noded) -> None:
    new_instance(bed, "cex1", "-t", "file", "--disk=0:size=32m")
    job_id = interrupt(bed, export_op("cex1", NODE2, long_sleep=True))
    assert where(bed, "cex1") == {} and new_dir(bed, NODE2, "cex1").is_dir()
    start_masterd(bed.cl)
    wait_until(
        lambda: (
            where(bed, "cex1") == {NODE1: "running"} and not new_dir(bed, NODE2, "cex1").exists()
        ),
        timeout=60,
        what="cex1 running again, its unfinished export gone",
    )
    assert_unclean_end(bed, job_id)
    assert ok(bed.cl.gnt("backup", "list", "--no-headers")).strip() == ""
    assert_nothing_left(bed)
    ok(bed.cl.gnt("instance", "remove", "-f", "cex1"))


@pytest.mark.slow
def test_failover_finished(bed: Bed) -> None:
    ok(add(bed.cl, "cfo1", "-t", "diskless", "-o", "dumper", "--no-install", "-n", NODE1))
    # Held once the source stopped it and the target was asked to start it.
    hold = arm_hv_gate(bed.paths(NODE2), "cfo1", "start")
    job_id = submit(bed, {"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": "cfo1",
                          "target_node": NODE2})  # fmt: skip
    try:
        wait_reached(hold)
        kill_9(bed.cl.paths.pid_file(MASTERD))
        start_masterd(bed.cl)
    finally:
        hold.unlink()
    wait_until(
        lambda: pnode(bed, "cfo1") == NODE2 and where(bed, "cfo1") == {NODE2: "running"},
        timeout=60,
        what="cfo1 running on node2, the configuration saying so",
    )
    assert_unclean_end(bed, job_id)
    wait_until(lambda: not intent_records(bed.cl), timeout=30, what="the record settled")
    assert_nothing_left(bed)
    ok(bed.cl.gnt("instance", "remove", "-f", "cfo1"))


@pytest.mark.slow
def test_leftover_on_an_unreachable_node_is_reported(bed: Bed, gate: Noded) -> None:
    new_instance(bed, "cex2", "-t", "file", "--disk=0:size=32m")
    target = bed.nodes[NODE3]
    job_id = interrupt(bed, export_op("cex2", NODE3, long_sleep=True))
    kill_9(target.paths.pid_file("corral-noded"))
    try:
        start_masterd(bed.cl)
        # The source answers: the instance runs again; node3 keeps its part.
        wait_until(lambda: where(bed, "cex2") == {NODE1: "running"}, 60, "cex2 running again")
        assert_unclean_end(bed, job_id)
        assert new_dir(bed, NODE3, "cex2").is_dir() and len(intent_records(bed.cl)) == 1
        rc, found = verify_findings(bed.cl)
        left = (
            f"- WARNING:ENODEORPHANLV:node:{NODE3}:unfinished export cex2.new left by an"
            " interrupted export of instance cex2 is not removed yet"
        )
        assert rc == 1 and any(x.startswith(left) for x in found), found
        assert any(x.startswith(f"- ERROR:ENODERPC:node:{NODE3}:") for x in found), found
    finally:
        restart_noded(target)
    # Back, node3 loses the unfinished export and masterd its record.
    wait_until(
        lambda: not intent_records(bed.cl) and not new_dir(bed, NODE3, "cex2").exists(),
        timeout=90,
        what="the leftover on node3 settled",
    )
    assert_nothing_left(bed)
    ok(bed.cl.gnt("instance", "remove", "-f", "cex2"))
