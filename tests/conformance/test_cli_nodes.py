"""``gnt-node``: Ganeti 3.0.2's command and Corral's print the same, against
a Corral cluster of three nodes (two of them twins for the changes)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.paths import Paths
from tests.conformance.compare import (
    assert_same,
    assert_same_on_twins,
    corral_on_terminal,
    ganeti,
    ganeti_on_terminal,
    normalized,
)
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.multinode import add_node

TWINS = ("twina.example.com", "twinb.example.com")
# What a change may change (the twins' addresses differ).
STATE = "name,role,master_candidate,drained,offline,master_capable,vm_capable,ndparams,tags"


@pytest.fixture(scope="module")
def ncluster(ganeti: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    root = tmp_path_factory.mktemp("nodes")
    with running_cluster(root / "master") as cl:
        added = []
        try:
            for name in TWINS:
                added.append(add_node(cl, root / name, name))
            assert cl.gnt("node", "add-tags", cl.node_name, "rack:a", "ssd").rc == 0
            # One candidate (the master) fills the pool: the twins' roles do not
            # depend on each other.
            assert cl.gnt("cluster", "modify", "-C", "1").rc == 0
            yield cl
        finally:
            for noded in added:
                noded.stop()


@pytest.mark.parametrize(
    "argv",
    [
        ["list", "-o", "name,pinst_cnt,sinst_cnt"],  # the default fields are live ones
        ["list", "--no-headers", "-o", "name,pip,sip,role,group,master_candidate,vm_capable"],
        ["list", "--separator=|", "-o", "name,tags,pinst_list,sinst_list,pinst_cnt"],
        ["list", "-o", "name,ndp/spindle_count,powered,offline,drained", TWINS[0]],
        ["list", "-o", "name,nosuchfield"],
        ["list", "no-such-node"],
        ["list-fields"],
        ["list-fields", "name", "role", "bogus"],
        ["info"],
        ["info", TWINS[0]],
        ["show", "no-such-node"],
        ["list-tags", "node1.example.com"],
        ["volumes"],
        ["volumes", "--no-headers"],
        ["list-storage", "-o", "node,type,name,size"],
        ["list-storage", "-o", "node,type,name,allocatable"],
        ["list-storage", "-t", "lvm-vg"],
        ["modify", TWINS[0]],
        ["modify-storage", TWINS[0], "lvm-pv", "/dev/sda"],
        ["modify", "--drained=yes", "--offline=yes", TWINS[0]],
        ["modify", "--offline=yes", "no-such-node"],
    ],
)
def test_read_only_commands(ncluster: TestCluster, argv: list[str]) -> None:
    assert_same(ncluster, ["gnt-node", *argv])


@pytest.mark.parametrize(
    "argv",
    [
        ["modify", "--drained=yes", "{}"],
        ["modify", "--drained=no", "{}"],
        ["modify", "--master-candidate=no", "{}"],
        ["modify", "--master-candidate=yes", "{}"],
        ["modify", "--vm-capable=no", "--master-capable=no", "{}"],
        ["modify", "--vm-capable=yes", "--master-capable=yes", "{}"],
        ["modify", "--node-parameters=spindle_count=2", "{}"],
        ["modify", "--node-parameters=spindle_count=x", "{}"],
        ["modify", "--submit", "--node-parameters=spindle_count=default", "{}"],
        ["add-tags", "{}", "web"],
        ["remove-tags", "{}", "web"],
        ["remove-tags", "{}", "absent"],
        ["modify-storage", "--allocatable=no", "{}", "lvm-pv", "/dev/sda"],
        ["repair-storage", "{}", "lvm-vg", "xenvg"],
        ["powercycle", "--yes", "{}"],
        ["evacuate", "-f", "{}"],
        ["migrate", "-f", "{}"],
        ["failover", "-f", "{}"],
    ],
)
def test_changes_on_twins(ncluster: TestCluster, argv: list[str]) -> None:
    assert_same_on_twins(ncluster, ["gnt-node", *argv], TWINS)
    assert_same_on_twins(ncluster, ["gnt-node", "list", "-o", STATE, "{}"], TWINS)


@pytest.mark.parametrize(
    ("argv", "answer"),
    [
        (["modify", "--offline=no", "{}"], "n"),
        (["modify", "--offline=no", "{}"], "y"),
        (["powercycle", "{}"], "n"),
        (["powercycle", "{}"], "y"),
    ],
)
def test_questions_on_a_terminal(ncluster: TestCluster, argv: list[str], answer: str) -> None:
    """The questions, the answer's effect and the exit code, as Ganeti's."""
    theirs = ganeti_on_terminal(ncluster, ["gnt-node", *(a.replace("{}", TWINS[0]) for a in argv)],
                                answer)  # fmt: skip
    ours = corral_on_terminal(ncluster, ["gnt-node", *(a.replace("{}", TWINS[1]) for a in argv)],
                              answer)  # fmt: skip
    assert ours[0] == theirs[0]
    assert normalized(ours[1], {TWINS[1]: "<TWIN>"}) == normalized(theirs[1], {TWINS[0]: "<TWIN>"})


@pytest.mark.parametrize(
    ("demotion", "restore"),
    [(["--master-candidate=no"], []), (["--drained=yes"], ["--drained=no"])],
)
def test_candidate_files_follow_the_role(
    ncluster: TestCluster, demotion: list[str], restore: list[str]
) -> None:
    """Ganeti's gnt-node promotes a twin: it gets the RAPI key; demoted (or
    drained), it loses it, as a Ganeti node loses its candidate-only files;
    Ganeti's gnt-cluster verify finds the files right after each change."""
    twin = TWINS[0]
    rapi_pem = Paths(ncluster.paths.root.parents[1] / twin).rapi_pem  # the fixture's layout
    promoted = ganeti(ncluster, ["gnt-node", "modify", "--master-candidate=yes", twin])
    assert promoted.rc == 0, promoted.stderr
    assert rapi_pem.read_bytes() == ncluster.paths.rapi_pem.read_bytes()
    verified = ganeti(ncluster, ["gnt-cluster", "verify"])
    assert verified.rc == 0, verified.stdout + verified.stderr
    demoted = ganeti(ncluster, ["gnt-node", "modify", *demotion, twin])
    assert demoted.rc == 0, demoted.stderr
    assert not rapi_pem.exists()
    verified = ganeti(ncluster, ["gnt-cluster", "verify"])
    assert verified.rc == 0, verified.stdout + verified.stderr
    if restore:
        assert ganeti(ncluster, ["gnt-node", "modify", *restore, twin]).rc == 0
