"""gnt-cluster epo on real daemons, two nodes and running instances: Ganeti's
QA test of it (qa/qa_cluster.py TestClusterEpo: all instances shut down, not
remembered, then started again), and the emergency power-off of a node
group whose node has an out-of-band program (tests/helpers/oob.py): off, the
node's instance stopped and the node powered off; on, the node powered on
and its instance started once noded answers there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cluster import TestCluster
from tests.helpers.instances import add, failed, ok, rows
from tests.helpers.multinode import cluster_with_nodes
from tests.helpers.oob import PROGRAM, OobProgram
from tests.helpers.osdef import make_os

NODE1, NODE2 = "node1.example.com", "node2.example.com"
INST1, INST2 = "inst1.example.com", "inst2.example.com"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with cluster_with_nodes(tmp_path_factory.mktemp("epo"), (NODE2,)) as (cl, [node2]):
        make_os(node2.paths, "plain", variants=None)
        for name, node in ((INST1, NODE1), (INST2, NODE2)):
            ok(add(cl, name, "-t", "diskless", "-o", "plain", "--no-install", "-n", node))
        yield cl


def statuses(cl: TestCluster) -> dict[str, str]:
    return {name: status for name, status in rows(cl, ["name", "status"])}


def powered(cl: TestCluster) -> list[str]:
    out = ok(cl.gnt("node", "list", "--verbose", "--no-headers", "-o", "powered"))
    return out.split()


def test_qa_cluster_epo(cl: TestCluster) -> None:
    assert powered(cl) == ["(unavail)", "(unavail)"]
    failed(cl.gnt("cluster", "epo", "--groups", "--all"), "Only one of --groups or --all")
    failed(cl.gnt("cluster", "epo", "--all", "some_arg"), "Arguments in combination with --all")
    failed(cl.gnt("cluster", "epo", "-f", NODE1), f"{NODE1} is the master node")
    assert statuses(cl) == {INST1: "running", INST2: "running"}

    out = ok(cl.gnt("cluster", "epo", "-f", "--all"))
    for node in (NODE1, NODE2):
        assert f"Node {node} does not support out-of-band handling" in out, out
    assert f"Submit shutdown of instance {INST1}" in out
    assert "All instances have been stopped successfully" in out
    # Down, but still marked up: the shutdown was not remembered.
    assert statuses(cl) == {INST1: "ERROR_down", INST2: "ERROR_down"}

    out = ok(cl.gnt("cluster", "epo", "--on", "-f", "--all"))
    assert "Waiting until all nodes are available again" in out, out
    assert f"Node {NODE2} became available" in out
    assert "All instances have been started successfully" in out
    assert statuses(cl) == {INST1: "running", INST2: "running"}


def test_a_node_group_powered_off_and_on_through_its_program(
    cl: TestCluster, tmp_path: Path
) -> None:
    oob = OobProgram(cl.paths, tmp_path / "oob")
    ok(cl.gnt("cluster", "modify", "--node-parameters", f"oob_program={PROGRAM}"))
    ok(cl.gnt("group", "add", "rack2"))
    ok(cl.gnt("group", "assign-nodes", "--force", "rack2", NODE2))
    try:
        out = ok(cl.gnt("cluster", "epo", "-f", "--groups", "rack2"))
        assert f"Submit shutdown of instance {INST2}" in out and INST1 not in out, out
        assert oob.runs() == [f"power-off {NODE2}"]
        assert statuses(cl) == {INST1: "running", INST2: "ERROR_down"}
        assert powered(cl) == ["Y", "N"]
        out = ok(cl.gnt("cluster", "epo", "-f", "--groups", "rack2"))
        assert f"Node {NODE2} is already in desired power state, skipping" in out, out
        assert oob.runs() == [f"power-off {NODE2}"]

        out = ok(cl.gnt("cluster", "epo", "--on", "-f", "--groups", "rack2"))
        assert oob.runs() == [f"power-off {NODE2}", f"power-on {NODE2}"]
        assert f"Submit startup of instance {INST2}" in out, out
        assert statuses(cl) == {INST1: "running", INST2: "running"}
        assert powered(cl) == ["Y", "Y"]
    finally:
        ok(cl.gnt("group", "assign-nodes", "--force", "default", NODE2))
        ok(cl.gnt("group", "remove", "rack2"))
        ok(cl.gnt("cluster", "modify", "--node-parameters", "oob_program="))
