"""A cluster whose master candidates run etcd members (corral.services.etcd_members),
as the etcd tests and benchmarks use it: the nodes on loopback, each under a
root of its own, gnt-* and masterd run in any node's root."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from corral.node.etcd_member import etcd_root
from corral.paths import Paths
from corral.process.daemons import stop_daemon
from corral.state.etcd.client import EtcdClient, EtcdError, client_ssl_context
from corral.state.etcd.members import Candidate, EtcdMemberInfo, list_members
from corral.state.etcd.server import member_pid
from tests.helpers.cluster import TestCluster
from tests.helpers.crash import MASTERD, kill_9, start_masterd
from tests.helpers.multinode import cluster_with_nodes
from tests.helpers.noded import Noded
from tests.helpers.waiting import poll_async, wait_until

# Seconds the members get to follow a change (learners copy, get promoted).
SETTLE = 90.0


@dataclass
class Bed:
    cl: TestCluster
    extra: list[Noded]
    nodes: list[Candidate]  # node1 (the master) to node4

    def paths(self, name: str) -> Paths:
        if name == self.cl.node_name:
            return self.cl.paths
        return next(n.paths for n in self.extra if n.name == name)

    def gnt_ok(self, command: str, *args: str) -> str:
        result = self.cl.gnt(command, *args)
        assert result.rc == 0, f"gnt-{command} {' '.join(args)}: {result.stderr}"
        return result.stdout

    def etcd(self) -> EtcdClient:
        """A client of every node's member (make it inside the test's loop)."""
        tls = client_ssl_context(self.cl.paths.ca_cert, self.cl.paths.client_pem)
        return EtcdClient([n.client_url for n in self.nodes], tls, deadline=2.0)

    def node(self, name: str) -> TestCluster:
        """The cluster as seen from node ``name`` (its root, its gnt-* commands)."""
        if name == self.cl.node_name:
            return self.cl
        node = next(n for n in self.extra if n.name == name)
        return TestCluster(node.paths, node.address, node.port, node_name=node.name)

    def master_name(self, name: str) -> str | None:
        """The master as node ``name``'s masterd answers (None: it does not answer
        as the master)."""
        result = self.node(name).gnt("cluster", "getmaster")
        ssconf_says = result.stdout.strip() if result.rc == 0 else None
        info = self.node(name).gnt("cluster", "master-ping")
        return ssconf_says if info.rc == 0 else None

    def restart_masterd(self, *options: str, crash: bool = False) -> None:
        if crash:
            kill_9(self.cl.paths.run_dir / f"{MASTERD}.pid")
        else:
            stop_daemon(self.cl.paths, MASTERD)
        start_masterd(self.cl, *options)


def etcd_pid(paths: Paths) -> int | None:
    """The pid of the node's etcd member, if one runs (by its pid file)."""
    root = etcd_root(paths)
    return member_pid(root / "etcd.pid", root / "data")


def roles(members: list[EtcdMemberInfo]) -> tuple[int, int]:
    """(voters, learners)."""
    learners = sum(m.learner for m in members)
    return len(members) - learners, learners


class WithEtcd(Protocol):
    def etcd(self) -> EtcdClient:
        """A client of every candidate's member."""
        ...


async def settle(bed: WithEtcd, wanted: tuple[int, int]) -> list[EtcdMemberInfo]:
    """The members once they are ``wanted`` (voters, learners), all started."""
    etcd = bed.etcd()

    async def members() -> list[EtcdMemberInfo] | str:
        try:
            return await list_members(etcd)
        except EtcdError as err:
            return err.message

    def done(found: list[EtcdMemberInfo] | str) -> bool:
        return not isinstance(found, str) and roles(found) == wanted and all(m.name for m in found)

    try:
        found = await poll_async(members, done, SETTLE, f"etcd members {wanted}", interval=0.2)
    finally:
        await etcd.close()
    assert not isinstance(found, str)
    return found


def standby_masterd(bed: Bed, name: str, *options: str) -> None:
    """Start masterd on node ``name`` (a candidate: it stands by); once it answers."""
    start_masterd(bed.node(name), *options)


def stop_masterds(bed: Bed) -> None:
    """Stop the masterds started on the nodes other than the first."""
    for node in bed.extra:
        stop_daemon(node.paths, MASTERD)


@contextmanager
def etcd_bed(root: Path, names: tuple[str, ...], *masterd_options: str) -> Iterator[Bed]:
    """A cluster of the first node and ``names``, every node a master candidate
    running an etcd member, its stores moved into etcd, masterd (with
    ``masterd_options``) leading on the first node and standing by on the others."""
    with cluster_with_nodes(root, names) as (cl, extra):
        nodes = [Candidate(cl.node_name, "", cl.node_ip)]
        nodes += [Candidate(n.name, "", n.address) for n in extra]
        bed = Bed(cl, extra, nodes)
        try:
            bed.restart_masterd(*masterd_options)
            bed.gnt_ok("cluster", "modify", "--etcd-members=yes")
            learners = 1 - len(nodes) % 2  # the voters stay odd
            asyncio.run(settle(bed, (len(nodes) - learners, learners)))
            for node in nodes:
                where = bed.paths(node.name).store_home
                wait_until(where.exists, SETTLE, f"{node.name} told where the stores live")
            for other in extra:
                standby_masterd(bed, other.name, *masterd_options)
            yield bed
        finally:
            stop_masterds(bed)
