"""``gnt-group``: Ganeti 3.0.2's command and Corral's print the same, against
a Corral cluster of two nodes; changes run on twin groups."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance import compare
from tests.conformance.compare import (
    Output,
    assert_same,
    assert_same_on_twins,
    corral,
    difference,
    ganeti,
)
from tests.conformance.ganeti import SYSTEM_PYTHON, ganeti_tree, run_in_namespace
from tests.helpers.cluster import Result, TestCluster, running_cluster
from tests.helpers.multinode import add_node

NODE2 = "node2.example.com"
TWINS = ("twina", "twinb")
STATE = "name,node_cnt,pinst_cnt,alloc_policy,ndparams,custom_ipolicy,custom_diskparams,tags"


@pytest.fixture(autouse=True)
def fixed_hash_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ganeti prints the bounds specs in the order of a frozenset ("min"/"max"),
    which follows string hashing: run its tools with PYTHONHASHSEED=3, under
    which it is the order Corral prints (as tests/conformance/test_cluster.py)."""

    def run(root: Path, argv: list[str], *, stdin: str | None = None) -> Result:
        command = [SYSTEM_PYTHON, str(ganeti_tree() / argv[0]), *argv[1:]]
        return run_in_namespace(root, command, stdin=stdin, env={"PYTHONHASHSEED": "3"})

    monkeypatch.setattr(compare, "run_ganeti", run)


@pytest.fixture(scope="module")
def gcl(ganeti: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    root = tmp_path_factory.mktemp("groups")
    with running_cluster(root / "master") as cl:
        node2 = add_node(cl, root / "node2", NODE2)
        try:
            for argv in (
                ["add", "--alloc-policy=last_resort", "--node-parameters=spindle_count=2",
                 "-D", "plain:stripes=2", "--ipolicy-vcpu-ratio=3.5", "rack1"],
                ["add", "empty"],
                ["add", *TWINS[:1]],
                ["add", *TWINS[1:]],
                ["assign-nodes", "rack1", NODE2],
                ["add-tags", "rack1", "row:3"],
            ):  # fmt: skip
                assert cl.gnt("group", *argv).rc == 0, argv
            yield cl
        finally:
            node2.stop()


@pytest.mark.parametrize(
    "argv",
    [
        ["list"],
        ["list", "--no-headers", "--separator=|", "-o", "+node_list,pinst_list,tags"],
        ["list", "-o", "name,nosuchfield"],
        ["list", "rack1", "no-such-group"],
        ["list-fields"],
        ["list-fields", "name", "bogus"],
        ["info"],
        ["info", "rack1"],
        ["info", "no-such-group"],
        ["show-ispecs-cmd"],
        ["show-ispecs-cmd", "--include-defaults", "rack1"],
        ["list-tags", "rack1"],
        ["remove", "rack1"],
        ["remove", "no-such-group"],
        ["rename", "rack1", "default"],
        ["add", "rack1"],
        ["assign-nodes", "rack1", "no-such-node"],
        ["evacuate", "empty"],
    ],
)
def test_read_only_commands(gcl: TestCluster, argv: list[str]) -> None:
    assert_same(gcl, ["gnt-group", *argv])


@pytest.mark.parametrize(
    "argv",
    [
        ["modify", "--alloc-policy=unallocable", "{}"],
        ["modify", "--node-parameters=spindle_count=3,ssh_port=2222", "{}"],
        ["modify", "--node-parameters=spindle_count=x", "{}"],
        ["modify", "-D", "drbd:resync-rate=1000", "{}"],
        ["modify", "--ipolicy-disk-templates=file,diskless", "{}"],
        ["modify", "--ipolicy-disk-templates=plain", "{}"],
        ["modify", "--ipolicy-vcpu-ratio=default", "{}"],
        ["modify", "{}"],
        ["add-tags", "{}", "a", "b"],
        ["remove-tags", "{}", "a"],
    ],
)
def test_changes_on_twins(gcl: TestCluster, argv: list[str]) -> None:
    assert_same_on_twins(gcl, ["gnt-group", *argv], TWINS)
    assert_same_on_twins(gcl, ["gnt-group", "list", "-o", STATE, "{}"], TWINS)
    assert_same_on_twins(gcl, ["gnt-group", "info", "{}"], TWINS)


def test_rename_then_remove(gcl: TestCluster) -> None:
    """Runs last: the twins are renamed (by each tool), then removed."""
    theirs = Output.of(ganeti(gcl, ["gnt-group", "rename", "twina", "twinx"]),
                       {"twina": "<OLD>", "twinx": "<NEW>"})  # fmt: skip
    ours = Output.of(corral(gcl, ["gnt-group", "rename", "twinb", "twiny"]),
                     {"twinb": "<OLD>", "twiny": "<NEW>"})  # fmt: skip
    assert ours == theirs, difference(theirs, ours)
    assert_same_on_twins(gcl, ["gnt-group", "list", "-o", STATE, "{}"], ("twinx", "twiny"))
    assert_same_on_twins(gcl, ["gnt-group", "remove", "{}"], ("twinx", "twiny"))
    assert_same(gcl, ["gnt-group", "list", "-o", "name"])
