"""OP_NODE_ADD against real node roots in-process: the join exchange and the
RPC checks of the new node, done, dry-run, refused half-way, cut by the node
going down, and retried."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import testbed
from corral.node import join_protocol as J
from corral.node.join_server import save_token, token_file
from corral.objects import Node
from corral.paths import Paths
from corral.rpc.calls_node import version
from tests.helpers.inprocess import InProcessCluster, in_process_cluster, node_address
from tests.helpers.noded import make_node_root

NODE3 = testbed.node_name(3)


@pytest.fixture
async def cl(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    async with in_process_cluster(tmp_path, nodes=1) as cluster:
        yield cluster


def add(**fields: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_NODE_ADD", "node_name": NODE3, "primary_ip": node_address(3), **fields}


def nodes(cl: InProcessCluster) -> list[str]:
    return sorted(n.name for n in cl.cfg.nodes())


async def test_a_node_joins_and_answers_as_a_cluster_member(cl: InProcessCluster) -> None:
    node = await cl.joining_node(3)
    job = await cl.run(add())
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert nodes(cl) == [testbed.node_name(1), NODE3]
    assert node.membership.joined and not token_file(node.paths).exists()
    assert node.paths.ssconf_file("cluster_name").read_text() == "cluster.example.com\n"
    assert await cl.rpc.run(cl.cfg.lookup(Node, NODE3), version()) == C.PROTOCOL_VERSION


async def test_add_dry_run_changes_nothing(cl: InProcessCluster) -> None:
    node = await cl.joining_node(3)
    serial = cl.cfg.serial
    job = await cl.run(add(dry_run=True))
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert cl.cfg.serial == serial and nodes(cl) == [testbed.node_name(1)]
    assert not node.membership.joined and token_file(node.paths).exists()


async def test_an_unreachable_node_is_refused_and_nothing_changes(cl: InProcessCluster) -> None:
    node = await cl.joining_node(3)
    node.reachable = False
    serial = cl.cfg.serial
    job = await cl.run(add())
    assert job.status == C.JOB_STATUS_ERROR
    assert job.error == (
        f"Cannot reach the node daemon of {NODE3} at {node_address(3)}: Connection refused;"
        " start corral-noded on the node (without cluster certificates it waits for a join)"
    )
    assert cl.cfg.serial == serial and not node.membership.joined
    # Once it answers, the same token still lets it join.
    node.reachable = True
    job = await cl.run(add())
    assert job.status == C.JOB_STATUS_SUCCESS, job.error


@pytest.mark.parametrize("step", ["hello", "finish"])
async def test_a_node_that_goes_down_while_joining_can_join_again(
    cl: InProcessCluster, step: str
) -> None:
    """The join is cut at either step: nothing changes, the token held for
    the join is released, and the node joins with it once it answers."""
    node = await cl.joining_node(3)
    node.go_down_at(step)
    serial = cl.cfg.serial
    job = await cl.run(add())
    assert job.status == C.JOB_STATUS_ERROR and "Connection refused" in job.error
    assert cl.cfg.serial == serial and not node.membership.joined
    node.reachable = True
    job = await cl.run(add())
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert nodes(cl) == [testbed.node_name(1), NODE3] and node.membership.joined


async def test_a_joined_node_that_goes_down_is_not_added(cl: InProcessCluster) -> None:
    """Joined, the node stops answering before it is checked: it is not
    added, and the error says it could not be told to leave."""
    node = await cl.joining_node(3)
    node.go_down_at(version)
    serial = cl.cfg.serial
    job = await cl.run(add())
    assert job.status == C.JOB_STATUS_ERROR
    down = f"Cannot connect to {node_address(3)}: Connection refused"
    assert job.error == (
        f"Node {NODE3} joined but does not answer as a cluster member: {down};"
        " it could not be told to leave either"
    )
    assert f" - WARNING: Node {NODE3} could not be told to leave: {down}" in job.log
    assert cl.cfg.serial == serial and nodes(cl) == [testbed.node_name(1)]


async def test_a_node_with_another_clusters_token_is_refused(
    cl: InProcessCluster, tmp_path: Path
) -> None:
    other = make_node_root(tmp_path / "other-master", cluster_name="other.example.com")
    paths = Paths(tmp_path / "node3")
    paths.root.mkdir()
    # A token of the other cluster's CA (the other master need not run).
    save_token(paths, J.new_token(J.pem_fingerprint(other.ca_cert.read_bytes())).text())
    node = cl.transport.add(paths, node_address(3))
    serial = cl.cfg.serial
    job = await cl.run(add())
    assert job.status == C.JOB_STATUS_ERROR
    assert job.error.startswith("The node's join token (")
    assert "was not made by this cluster's master" in job.error
    assert cl.cfg.serial == serial and nodes(cl) == [testbed.node_name(1)]
    assert not node.membership.joined and not paths.server_pem.exists()


async def test_a_node_in_the_cluster_already_is_not_added_again(cl: InProcessCluster) -> None:
    job = await cl.add_node(3)
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    serial = cl.cfg.serial
    job = await cl.run(add())
    assert job.status == C.JOB_STATUS_ERROR
    assert job.error == f"Node {NODE3} is already in the configuration"
    assert cl.cfg.serial == serial
