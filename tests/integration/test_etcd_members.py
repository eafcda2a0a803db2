"""etcd members run by noded on the master candidates, following the candidate
list (the reconciler the master runs: :mod:`corral.state.etcd.members`), on a
four-node cluster on loopback with the nodes' own certificates."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from corral.node.etcd_member import etcd_root
from corral.paths import Paths
from corral.rpc.https import https_client
from corral.state.etcd.client import EtcdClient, client_ssl_context
from corral.state.etcd.members import (
    Candidate,
    EtcdMemberInfo,
    MemberReconciler,
    list_members,
    reconcile,
)
from corral.state.etcd.server import member_pid
from tests.helpers.multinode import cluster_with_nodes
from tests.helpers.noded import start_noded

NAMES = ("node2.example.com", "node3.example.com", "node4.example.com")


def etcd_pid(paths: Paths) -> int | None:
    """The pid of the node's etcd member, if one runs (by its pid file)."""
    root = etcd_root(paths)
    return member_pid(root / "etcd.pid", root / "data")


@pytest.mark.slow
async def test_members_follow_candidates(tmp_path_factory: pytest.TempPathFactory) -> None:
    with cluster_with_nodes(tmp_path_factory.mktemp("etcdm"), NAMES) as (cl, extra):
        roots = {cl.node_name: cl.paths, **{n.name: n.paths for n in extra}}
        nodes = [Candidate(cl.node_name, cl.node_name, cl.node_ip)] + [
            Candidate(n.name, n.name, n.address) for n in extra
        ]
        tls = client_ssl_context(cl.paths.ca_cert, cl.paths.client_pem)
        etcd = EtcdClient([n.client_url for n in nodes], tls)
        rpc = https_client(cl.paths, cl.port)
        try:

            async def members_with(count: int) -> list[EtcdMemberInfo]:
                wanted, others = nodes[:count], nodes[count:]
                await reconcile(MemberReconciler(rpc, etcd, wanted, others))
                return await list_members(etcd)

            def roles(members: list[EtcdMemberInfo]) -> tuple[int, int]:
                learners = sum(m.learner for m in members)
                return len(members) - learners, learners

            # One candidate: a one-member cluster on the master.
            assert roles(await members_with(1)) == (1, 0)
            assert etcd_pid(cl.paths) is not None
            # Three: learners, then promoted: three voters.
            members = await members_with(3)
            assert roles(members) == (3, 0)
            assert sorted(m.name for m in members) == sorted(n.name for n in nodes[:3])
            # Four: the voters stay three, the fourth is a learner.
            members = await members_with(4)
            assert roles(members) == (3, 1)
            assert [m.peer_urls for m in members if m.learner] == [(nodes[3].peer_url,)]
            # Back to three: the fourth's member is removed and stops.
            members = await members_with(3)
            assert roles(members) == (3, 0)
            assert etcd_pid(roots[nodes[3].name]) is None
            assert not etcd_root(roots[nodes[3].name]).exists()

            # kill -9 of a member: it runs again when its noded starts again.
            victim = extra[1]
            pid = etcd_pid(victim.paths)
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            victim.stop()
            start_noded(victim.paths, victim.address, victim.port)
            restarted = etcd_pid(victim.paths)
            assert restarted is not None and restarted != pid
            client_url = nodes[2].client_url
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while not await etcd.healthy(client_url):
                assert loop.time() < deadline, "the restarted member does not serve"
                await asyncio.sleep(0.1)
        finally:
            await rpc.close()
            await etcd.close()
            pids = {name: etcd_pid(paths) for name, paths in roots.items()}
    # The cluster's daemons stopped: no member is left running.
    for name, paths in roots.items():
        assert etcd_pid(paths) is None, f"etcd of {name} runs after the cluster stopped"
    assert any(pids.values())
