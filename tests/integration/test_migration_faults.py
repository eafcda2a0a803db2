"""Migrations interrupted on purpose: the target's noded killed (kill -9)
while it accepts the instance, masterd killed in the middle of a migration
and ``gnt-instance migrate --cleanup`` repairing what it left.

The fake hypervisor's test gates (see corral.node.hypervisor.fake) stop a
step on one node until the test removes the gate file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from corral import constants as C
from corral.paths import Paths
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.crash import MASTERD, arm_hv_gate, kill_9, start_masterd, wait_reached
from tests.helpers.instances import add, ok, rows
from tests.helpers.jobs import wait_final
from tests.helpers.multinode import add_node
from tests.helpers.noded import Noded, start_noded
from tests.helpers.osdef import make_os

NODE1, NODE2 = "node1.example.com", "node2.example.com"


class Pair:
    """A two-node cluster: the master node and node2 (whose noded may be restarted)."""

    def __init__(self, cl: TestCluster, node2: Noded) -> None:
        self.cl = cl
        self.node2 = node2

    @property
    def roots(self) -> dict[str, Paths]:
        return {NODE1: self.cl.paths, NODE2: self.node2.paths}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    root = tmp_path_factory.mktemp("faults")
    with running_cluster(root / "node1") as cl:
        pair = Pair(cl, add_node(cl, root / "node2", NODE2))
        try:
            for paths in pair.roots.values():
                make_os(paths, "plain", variants=None)
            yield pair
        finally:
            pair.node2.stop()


def where(pair: Pair, name: str) -> dict[str, str]:
    out = {}
    for node, paths in pair.roots.items():
        path = paths.run_dir / "fake-hypervisor" / name
        if path.exists():
            out[node] = json.loads(path.read_text())["state"]
    return out


def submit_migrate(cl: TestCluster, name: str, target: str) -> int:
    with cl.client() as client:
        op = {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": name, "target_node": target}
        return int(client.submit_job([op]))


def job_info(cl: TestCluster, job_id: int) -> list[Any]:
    with cl.client() as client:
        (row,) = wait_final(client, [job_id], ("opresult", "oplog"), timeout=60)
    return list(row)


def test_target_killed_while_accepting(pair: Pair) -> None:
    cl = pair.cl
    ok(add(cl, "kill1", "-t", "diskless", "-o", "plain", "--no-install", "-n", NODE1))
    gate = arm_hv_gate(pair.node2.paths, "kill1", "accept")
    job_id = submit_migrate(cl, "kill1", NODE2)
    wait_reached(gate)
    kill_9(pair.node2.paths.pid_file("corral-noded"))
    gate.unlink()
    status, opresult, oplog = job_info(cl, job_id)
    assert status == C.JOB_STATUS_ERROR
    assert "Could not pre-migrate instance kill1" in json.dumps(opresult), opresult
    messages = [entry[3] for entry in oplog[0]]
    assert "Pre-migration failed, aborting" in messages, messages
    # The source is intact and the configuration unchanged.
    assert where(pair, "kill1") == {NODE1: "running"}
    assert rows(cl, ["pnode", "status"], "kill1") == [[NODE1, "running"]]
    # The target, back, holds nothing of the instance; the migration now works.
    pair.node2 = start_noded(pair.node2.paths, pair.node2.address, pair.node2.port)
    pair.node2.name = NODE2
    assert where(pair, "kill1") == {NODE1: "running"}
    ok(cl.gnt("instance", "migrate", "-f", "-n", NODE2, "kill1"))
    assert where(pair, "kill1") == {NODE2: "running"}
    ok(cl.gnt("instance", "remove", "-f", "kill1"))


def _interrupt(pair: Pair, name: str, paths: Paths, step: str) -> None:
    """Start migrating ``name`` to node2, kill masterd at ``step``, start it again."""
    cl = pair.cl
    gate = arm_hv_gate(paths, name, step)
    job_id = submit_migrate(cl, name, NODE2)
    wait_reached(gate)
    kill_9(cl.paths.pid_file(MASTERD))
    gate.unlink()
    start_masterd(cl)
    status, _, _ = job_info(cl, job_id)
    assert status == C.JOB_STATUS_ERROR


def test_cleanup_when_running_on_both_nodes(pair: Pair) -> None:
    cl = pair.cl
    ok(add(cl, "half1", "-t", "diskless", "-o", "plain", "--no-install", "-n", NODE1))
    # Killed before the source sends it: both nodes hold the instance.
    _interrupt(pair, "half1", cl.paths, "migrate")
    assert set(where(pair, "half1")) == {NODE1, NODE2}
    assert rows(cl, ["pnode"], "half1") == [[NODE1]]
    out = ok(cl.gnt("instance", "migrate", "-f", "--cleanup", "half1"))
    assert "Trying to cleanup after failed migration" in out, out
    assert f"* instance confirmed to be running on its primary node ({NODE1})" in out, out
    assert where(pair, "half1") == {NODE1: "running"}
    assert rows(cl, ["pnode"], "half1") == [[NODE1]]
    ok(cl.gnt("instance", "remove", "-f", "half1"))


def test_cleanup_when_moved_but_not_recorded(pair: Pair) -> None:
    cl = pair.cl
    ok(add(cl, "half2", "-t", "diskless", "-o", "plain", "--no-install", "-n", NODE1))
    # Killed while finalizing on the target: the source already let it go.
    _interrupt(pair, "half2", pair.node2.paths, "finalize_dst")
    assert set(where(pair, "half2")) == {NODE2}
    assert rows(cl, ["pnode"], "half2") == [[NODE1]]
    out = ok(cl.gnt("instance", "migrate", "-f", "--cleanup", "half2"))
    assert f"* instance running on secondary node ({NODE2}), updating config" in out, out
    assert where(pair, "half2") == {NODE2: "running"}
    assert rows(cl, ["pnode", "status"], "half2") == [[NODE2, "running"]]
    # Nothing left to repair: a second cleanup confirms it.
    out = ok(cl.gnt("instance", "migrate", "-f", "--cleanup", "half2"))
    assert f"* instance confirmed to be running on its primary node ({NODE2})" in out, out
    ok(cl.gnt("instance", "remove", "-f", "half2"))


def run_op(cl: TestCluster, op: dict[str, Any]) -> list[Any]:
    with cl.client() as client:
        job_id = int(client.submit_job([op]))
    return job_info(cl, job_id)


def test_unreachable_nodes(pair: Pair) -> None:
    cl = pair.cl
    ok(add(cl, "gone1", "-t", "diskless", "-o", "plain", "--no-install", "-n", NODE2))
    pair.node2.stop()
    try:
        # An unreachable target: refused before anything is done.
        ok(add(cl, "gone2", "-t", "diskless", "-o", "plain", "--no-install", "-n", NODE1))
        status, opresult, _ = run_op(
            cl, {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "gone2", "target_node": NODE2}
        )
        assert status == C.JOB_STATUS_ERROR
        assert f"Cannot reach target node {NODE2}" in json.dumps(opresult), opresult
        assert where(pair, "gone2") == {NODE1: "running"}
        # An unreachable source: the failover stops, unless told the node is down.
        op = {"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": "gone1", "target_node": NODE1}
        status, opresult, _ = run_op(cl, op)
        assert status == C.JOB_STATUS_ERROR
        assert f"Could not shutdown instance gone1 on node {NODE2}" in json.dumps(opresult)
        assert rows(cl, ["pnode"], "gone1") == [[NODE2]]
        status, _, oplog = run_op(cl, {**op, "ignore_consistency": True})
        assert status == C.JOB_STATUS_SUCCESS
        assert any("proceeding anyway" in entry[3] for entry in oplog[0]), oplog
        assert rows(cl, ["pnode", "status"], "gone1") == [[NODE1, "running"]]
    finally:
        pair.node2 = start_noded(pair.node2.paths, pair.node2.address, pair.node2.port)
        pair.node2.name = NODE2
    # The source, back, still holds the instance it could not be told to stop:
    # the state cluster verify reports, as Ganeti leaves it.
    assert where(pair, "gone1") == {NODE1: "running", NODE2: "running"}
    for name in ("gone1", "gone2"):
        ok(cl.gnt("instance", "remove", "-f", name))
