"""Out-of-band management on real daemons, two nodes and running instances,
step by step as Ganeti 3.0.2's QA suite tests it:

- qa/qa_cluster.py TestClusterEpo: all instances shut down, not remembered,
  then started again;
- qa/qa_node.py TestOutOfBand, with its program (tests/helpers/oob.py); its
  ``gnt-node modify -O no`` steps get ``-f`` here: Ganeti's own gnt-node asks
  a question there, which without a terminal (the suite's ssh has none)
  answers no, so that the suite's test fails against Ganeti 3.0.2 itself
  (tests/conformance/test_cli_oob.py shows both tools refuse alike);
- qa/qa_cluster.py TestClusterOob, the program's copies put on the nodes
  directly (the suite uses ``gnt-cluster copyfile`` and ``command``);

and the emergency power-off of a node group whose node has a program: off,
the node's instance stopped and the node powered off; on, the node powered
on and its instance started once noded answers there."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cluster import Result, TestCluster
from tests.helpers.instances import add, failed, ok, rows
from tests.helpers.multinode import cluster_with_nodes
from tests.helpers.noded import Noded
from tests.helpers.oob import PROGRAM, OobProgram
from tests.helpers.osdef import make_os

NODE1, NODE2 = "node1.example.com", "node2.example.com"
INST1, INST2 = "inst1.example.com", "inst2.example.com"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestCluster, Noded]]:
    with cluster_with_nodes(tmp_path_factory.mktemp("oob"), (NODE2,)) as (cl, [node2]):
        make_os(node2.paths, "plain", variants=None)
        for name, node in ((INST1, NODE1), (INST2, NODE2)):
            ok(add(cl, name, "-t", "diskless", "-o", "plain", "--no-install", "-n", node))
        yield cl, node2


@pytest.fixture
def cl(nodes: tuple[TestCluster, Noded]) -> TestCluster:
    return nodes[0]


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


def node_power(cl: TestCluster, oob: OobProgram, args: list[str], fail: bool = False) -> None:
    """``gnt-node power ARGS`` fails or not, and ran the program (on node 2) once."""
    before = len(oob.runs())
    result = cl.gnt("node", "power", *args)
    assert (result.rc != 0) == fail, (args, result)
    command = "power-" + next(a for a in args if not a.startswith("-"))
    assert oob.runs()[before:] == [f"{command} {NODE2}"]


def health(cl: TestCluster, oob: OobProgram, fail: bool, *names: str) -> None:
    before = len(oob.runs())
    result = cl.gnt("node", "health", *names)
    assert (result.rc != 0) == fail, (names, result)
    wanted = [NODE2] if names else [NODE1, NODE2]
    assert oob.runs()[before:] == [f"health {name}" for name in wanted]


def test_qa_out_of_band(cl: TestCluster, tmp_path: Path) -> None:
    oob = OobProgram(cl.paths, tmp_path / "oob")
    ok(cl.gnt("cluster", "modify", "--node-parameters", f"oob_program={PROGRAM}"))
    try:
        # No data, exit 0
        node_power(cl, oob, ["on", NODE2])
        node_power(cl, oob, ["-f", "off", NODE2])
        runs = len(oob.runs())
        failed(cl.gnt("node", "power", "-f", "off", NODE1))
        failed(cl.gnt("node", "power", "-f", "--ignore-status", "off", NODE1))
        failed(cl.gnt("node", "modify", "-f", "-O", "no", NODE2), "needs to be turned on")
        ok(cl.gnt("node", "modify", "-f", "-O", "no", "--node-powered", "yes", NODE2))
        assert len(oob.runs()) == runs
        node_power(cl, oob, ["-f", "cycle", NODE2])
        node_power(cl, oob, ["status", NODE2], fail=True)
        health(cl, oob, True, NODE2)
        health(cl, oob, True)
        # Correct data, exit 0
        oob.answer(json.dumps({"powered": True}))
        node_power(cl, oob, ["status", NODE2])
        oob.answer(json.dumps([["temp", "OK"], ["disk0", "CRITICAL"]]))
        health(cl, oob, False, NODE2)
        health(cl, oob, False)
        node_power(cl, oob, ["on", NODE2], fail=True)
        node_power(cl, oob, ["-f", "off", NODE2], fail=True)
        ok(cl.gnt("node", "modify", "-f", "-O", "no", NODE2))
        node_power(cl, oob, ["-f", "cycle", NODE2], fail=True)
        # Data and no data, exit 1
        for data in (json.dumps([["temp", "OK"]]), ""):
            oob.answer(data, exit_code=1)
            node_power(cl, oob, ["on", NODE2], fail=True)
            node_power(cl, oob, ["-f", "off", NODE2], fail=True)
            ok(cl.gnt("node", "modify", "-f", "-O", "no", NODE2))
            node_power(cl, oob, ["-f", "cycle", NODE2], fail=True)
            node_power(cl, oob, ["status", NODE2], fail=True)
            health(cl, oob, True, NODE2)
            health(cl, oob, True)
        # A program of the node's own
        other = OobProgram(cl.paths, tmp_path / "other", f"{PROGRAM}-2")
        ok(cl.gnt("node", "modify", "--node-parameters", f"oob_program={other.name}", NODE2))
        try:
            ok(cl.gnt("node", "power", "on", NODE2))
            assert other.runs() == [f"power-on {NODE2}"]
        finally:
            ok(cl.gnt("node", "modify", "--node-parameters", "oob_program=default", NODE2))
    finally:
        ok(cl.gnt("cluster", "modify", "--node-parameters", "oob_program="))
    assert powered(cl) == ["(unavail)", "(unavail)"]


def verify(cl: TestCluster) -> Result:
    return cl.gnt("cluster", "verify")


def test_qa_cluster_oob(nodes: tuple[TestCluster, Noded]) -> None:
    cl, node2 = nodes
    ok(verify(cl))
    missing = "/tmp/qa-oob-does-not-exist"
    ok(cl.gnt("cluster", "modify", "--node-parameters", f"oob_program={missing}"))
    result = verify(cl)
    why = f"error stating out of band helper: [Errno 2] No such file or directory: '{missing}'"
    assert result.rc == 1 and f"ERROR: node {NODE1}: {why}" in result.stdout, result
    program = "/tmp/qa-oob-does-exist"
    copies = [paths.from_wire(program) for paths in (cl.paths, node2.paths)]
    try:
        for copy in copies:  # touch, chmod 0400, gnt-cluster copyfile
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text("")
            copy.chmod(0o400)
        ok(cl.gnt("cluster", "modify", "--node-parameters", f"oob_program={program}"))
        result = verify(cl)
        why = f"out of band helper {program} is not executable"
        assert result.rc == 1 and f"ERROR: node {NODE2}: {why}" in result.stdout, result
        for copy in copies:  # chmod 0500, gnt-cluster copyfile
            copy.chmod(0o500)
        ok(verify(cl))
    finally:
        for copy in copies:
            copy.unlink()
    ok(cl.gnt("cluster", "modify", "--node-parameters", "oob_program="))
