"""``gnt-storage`` on a real three-node cluster whose nodes have different
ExtStorage providers: Corral's output is what it must be, and Ganeti 3.0.2's
own command prints the same."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.compare import assert_same
from tests.helpers.cluster import TestCluster
from tests.helpers.extstorage import node_provider
from tests.helpers.jobs import wait_final
from tests.helpers.multinode import cluster_with_nodes
from tests.helpers.noded import Noded, start_noded

ES = "/srv/ganeti/extstorage"

DIAGNOSE = f"""\
Provider: broken
---
  Node: node1.example.com, status: invalid - File 'create' under path '{ES}/broken' is not\
 executable (path: {ES}/broken) [no parameters]
  Node: node2.example.com, status: invalid - File 'parameters.list' under path '{ES}/broken'\
 is missing (ENOENT) (path: {ES}/broken) [no parameters]
  Node: node3.example.com, status: ExtStorage provider not found
  --
  For nodegroup: default --> invalid
  For nodegroup: other --> invalid

Provider: good
---
  Node: node1.example.com, status: valid (path: {ES}/good) [parameters: pool, size]
  Node: node2.example.com, status: valid (path: {ES}/good) [parameters: size, pool]
  Node: node3.example.com, status: valid (path: {ES}/good) [parameters: pool, size, extra]
  --
  For nodegroup: default --> valid
  For nodegroup: other --> valid

Provider: onlyone
---
  Node: node1.example.com, status: valid (path: {ES}/onlyone) [no parameters]
  Node: node2.example.com, status: ExtStorage provider not found
  Node: node3.example.com, status: ExtStorage provider not found
  --
  For nodegroup: default --> invalid
  For nodegroup: other --> invalid

Provider: third
---
  Node: node3.example.com, status: valid (path: {ES}/third) [parameters: x]
  Node: node1.example.com, status: ExtStorage provider not found
  Node: node2.example.com, status: ExtStorage provider not found
  --
  For nodegroup: other --> valid
  For nodegroup: default --> invalid

"""

INFO = """\
broken:
  - Invalid for all nodegroups

good:
  - Valid for nodegroups:
      default
      other
  - Supported parameters:
      pool: The pool
      size: The size in MiB

onlyone:
  - Invalid for all nodegroups

third:
  - Valid for nodegroups:
      other
  - Supported parameters:
      x: An x

"""


@pytest.fixture(scope="module")
def nodes(
    ganeti: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TestCluster, list[Noded]]]:
    """node1 (the master) and node2 in the group ``default``, node3 in ``other``;
    no providers yet."""
    with cluster_with_nodes(tmp_path_factory.mktemp("storage")) as (cl, extra):
        assert cl.gnt("group", "add", "other").rc == 0
        assert cl.gnt("group", "assign-nodes", "other", "node3.example.com").rc == 0
        yield cl, extra


@pytest.fixture(scope="module")
def scluster(nodes: tuple[TestCluster, list[Noded]]) -> TestCluster:
    """The cluster with a provider valid everywhere (``good``, its parameters
    differing), one broken differently on two nodes, one on node1 only, one on
    node3 only."""
    cl, (node2, node3) = nodes
    pool, size = "pool The pool\n", "size The size in MiB\n"
    node_provider(cl.paths, "good", pool + size)
    node_provider(node2.paths, "good", size + pool)
    node_provider(node3.paths, "good", pool + size + "extra More\n")
    (node_provider(cl.paths, "broken") / "create").chmod(0o644)
    node_provider(node2.paths, "broken", None)
    node_provider(cl.paths, "onlyone")
    node_provider(node3.paths, "third", "x An x\n")
    return cl


def test_no_provider_anywhere(nodes: tuple[TestCluster, list[Noded]]) -> None:
    cl, _ = nodes
    out = assert_same(cl, ["gnt-storage", "diagnose"])
    assert (out.rc, out.stdout, out.stderr) == (
        1,
        "",
        "Can't get the list of ExtStorage providers\n",
    )
    out = assert_same(cl, ["gnt-storage", "info", "x"])
    assert (out.rc, out.stderr) == (1, "Can't get the ExtStorage providers list\n")


def test_diagnose(scluster: TestCluster) -> None:
    out = assert_same(scluster, ["gnt-storage", "diagnose"])
    assert (out.rc, out.stdout, out.stderr) == (0, DIAGNOSE, "")


def test_info(scluster: TestCluster) -> None:
    out = assert_same(scluster, ["gnt-storage", "info"])
    assert (out.rc, out.stdout, out.stderr) == (0, INFO, "")


def test_info_of_named_providers(scluster: TestCluster) -> None:
    out = assert_same(scluster, ["gnt-storage", "info", "third", "nosuch", "good"])
    good, third = INFO.split("\n\n")[1], INFO.split("\n\n")[3]
    assert out.stdout == f"{good}\n\n{third}\n\nnosuch: Not Found\n\n"
    assert out.rc == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["info", "nosuch"],
        ["info", "good", "good"],
        ["info", "--priority", "high", "good"],
        ["diagnose", "--priority", "low"],
        ["diagnose", "extra"],
    ],
)
def test_options_and_bad_input(scluster: TestCluster, argv: list[str]) -> None:
    assert_same(scluster, ["gnt-storage", *argv])


def diagnose_job(cl: TestCluster, fields: list[str], names: list[str]) -> list[Any]:
    """The status, result and error log of an OP_EXT_STORAGE_DIAGNOSE job."""
    op = {"OP_ID": "OP_EXT_STORAGE_DIAGNOSE", "output_fields": fields, "names": names}
    with cl.client() as client:
        job = client.submit_job([op])
        return wait_final(client, [job], ("status", "opresult"))[0]


def test_the_opcode_with_names_and_fields(scluster: TestCluster) -> None:
    # Names asked for come in that order, once each; a name no node has gives no row.
    status, result = diagnose_job(scluster, ["name", "nodegroup_status"], ["third", "x", "good",
                                                                          "third"])  # fmt: skip
    assert status == "success"
    assert result == [[
        ["third", {"default": False, "other": True}],
        ["good", {"default": True, "other": True}],
    ]]  # fmt: skip
    status, result = diagnose_job(scluster, ["parameters", "node_status"], ["onlyone"])
    assert result == [[[[], {
        "node1.example.com": [[f"{ES}/onlyone", True, "", []]],
        "node2.example.com": [],
        "node3.example.com": [],
    }]]]  # fmt: skip


def test_an_unknown_field_is_refused(scluster: TestCluster) -> None:
    status, result = diagnose_job(scluster, ["name", "bogus", "valid"], [])
    assert status == "error"
    assert result == [
        ["OpPrereqError", ["Unknown output fields selected: bogus, valid", "wrong_input"]]
    ]


def test_a_node_that_does_not_answer_makes_nothing_invalid(
    scluster: TestCluster, nodes: tuple[TestCluster, list[Noded]]
) -> None:
    _, (_, node3) = nodes
    assert node3.stop()
    try:
        out = scluster.gnt("storage", "diagnose")
    finally:
        start_noded(node3.paths, node3.address, node3.port)
    providers = out.stdout.split("\n\n")
    assert out.rc == 0, out.stderr
    # node3 is left out; "other" (node3 alone) has no node against a provider.
    assert [p.splitlines()[0] for p in providers[:-1]] == [
        "Provider: broken",
        "Provider: good",
        "Provider: onlyone",
    ]
    assert "node3" not in out.stdout
    assert "  For nodegroup: default --> valid\n  For nodegroup: other --> valid" in providers[1]
    assert (
        "  For nodegroup: other --> valid\n  For nodegroup: default --> invalid" in (providers[2])
    )
