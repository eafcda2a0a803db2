"""``gnt-cluster master-failover --no-voting``: a master candidate takes the
mastership when most of etcd's members are lost.

etcd cannot elect a leader without a majority of its voters, so no
candidate can take the lease then.  Run on a survivor, ``--no-voting``
makes the survivor's own etcd member the only member of its cluster (etcd's
``--force-new-cluster``), with the copy of the stores it has: whatever the
lost members had acknowledged and this one had not received is lost (the
command says how far this copy goes).  The old master's lease then runs
out, and this node's standing-by masterd takes it as in any failover, with
a token far ahead of any the lost members may have given out.  The
lost candidates' members, should their nodes come back, are dropped and
join again as learners of this copy (:mod:`corral.services.etcd_reconciler`).

As in Ganeti, the operator answers for the others being really down: the
command is refused while etcd still has a quorum (a hand-over is possible
then), but a candidate cut off from a majority that still works cannot
tell it from a majority that died.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from corral import constants as C
from corral import errors
from corral.node.etcd_member import MemberWish, read_wish
from corral.objects import Cluster, Node
from corral.paths import Paths
from corral.rpc.calls_etcd import etcd_member_force_new
from corral.rpc.https import https_client
from corral.rpc.result import NodeAddress
from corral.state import home
from corral.state.etcd import client as etcd
from corral.state.etcd.client import (
    CALL_DEADLINE,
    EtcdClient,
    EtcdError,
    client_ssl_context,
    prefix_end,
)
from corral.state.etcd.config import OBJECTS, SERIAL_KEY
from corral.state.etcd.mastership import TOKEN_COUNTER

log = logging.getLogger(__name__)

# Seconds a look at the local member gets (a read that needs a quorum waits
# for a leader: with none, it fails once this passes).
PROBE_DEADLINE = 3.0
# How far the mastership's token counter leaps: the lost majority may have
# given out tokens this copy never saw (each failover one), and a node that
# saw one refuses older ones; it could not have given out this many.
TOKEN_LEAP = 1_000_000


@dataclass(frozen=True)
class LocalCopy:
    """How far this node's copy of the stores goes, and how to reach its noded."""

    serial: int  # the configuration's
    revision: int  # etcd's, of the member's copy
    node_uuid: str
    noded_port: int


async def force_store(paths: Paths, holder: str) -> str:
    """Make this node's etcd member (of node ``holder``) the only one, with
    its copy of the stores; what may have been lost, for the operator."""
    where = await asyncio.to_thread(home.read, paths.store_home)
    wish = await asyncio.to_thread(read_wish, paths)
    if not isinstance(where, home.EtcdHome) or wish is None:
        raise errors.OpPrereqError(
            f"This node ({holder}) holds no copy of the cluster's stores in etcd: it cannot"
            " take the mastership without the other master candidates",
            C.ECODE_STATE,
        )
    copy = await _look(paths, wish, where.prefix, holder)
    rpc = https_client(paths, copy.noded_port)
    try:
        await rpc.run(NodeAddress(copy.node_uuid, wish.ip), etcd_member_force_new(), "etcd member")
    finally:
        await rpc.close()
    await _leap_tokens(paths, wish, where.prefix)
    return (
        f"This node's copy of the cluster's stores is now the only one: configuration serial"
        f" {copy.serial}, etcd revision {copy.revision}. Whatever the other master candidates"
        " acknowledged after it is lost; their etcd members were dropped, and join this"
        " copy again once their nodes are back"
    )


@contextlib.asynccontextmanager
async def _local(
    paths: Paths, wish: MemberWish, deadline: float = CALL_DEADLINE
) -> AsyncIterator[EtcdClient]:
    """A client of this node's own member only."""
    tls = await asyncio.to_thread(client_ssl_context, paths.ca_cert, paths.client_pem)
    local = EtcdClient([wish.member().client_url], tls, deadline=deadline)
    try:
        yield local
    finally:
        await local.close()


async def _look(paths: Paths, wish: MemberWish, prefix: str, holder: str) -> LocalCopy:
    """This node's copy, read from its own member (refused while etcd has a quorum)."""
    async with _local(paths, wish, PROBE_DEADLINE) as local:
        try:
            await local.range(prefix + SERIAL_KEY)
        except EtcdError:
            pass  # no quorum: as --no-voting is for
        else:
            raise errors.OpPrereqError(
                "etcd still has a quorum of its members: run 'gnt-cluster master-failover'"
                " without --no-voting (the master hands over)",
                C.ECODE_STATE,
            )
        try:
            serial, revision, _ = await local.range(prefix + SERIAL_KEY, serializable=True)
            cluster = await _table(local, prefix + f"{OBJECTS}{Cluster.TABLE}/")
            nodes = await _table(local, prefix + f"{OBJECTS}{Node.TABLE}/")
        except EtcdError as err:
            raise errors.OpExecError(
                f"This node's etcd member does not answer ({err.message}); see its log"
                f" under {wish.ip}'s data directory (etcd/etcd.log)"
            ) from None
    own = next((row["uuid"] for row in nodes if row.get("name") == holder), None)
    if not serial or not cluster or own is None:
        raise errors.OpExecError(
            f"This node's etcd member holds no configuration of {holder} under {prefix}"
        )
    return LocalCopy(int(serial[0].value), revision, own, int(cluster[0]["noded_port"]))


async def _leap_tokens(paths: Paths, wish: MemberWish, prefix: str) -> None:
    """Raise the token counter of the forced store by TOKEN_LEAP, so that the
    next master's token is newer than any the nodes may have seen (the store
    has no other writer now: the keeper is held off)."""
    counter = prefix + TOKEN_COUNTER
    async with _local(paths, wish) as local:
        found, _, _ = await local.range(counter)
        token = int(found[0].value) if found else 0
        await local.txn([], [etcd.put(counter, str(token + TOKEN_LEAP).encode())])
    log.warning("Mastership tokens leap from %d to %d", token, token + TOKEN_LEAP)


async def _table(local: EtcdClient, prefix: str) -> list[dict[str, Any]]:
    """The rows under ``prefix``, as the local member has them."""
    kvs, _, _ = await local.range(prefix, prefix_end(prefix), serializable=True)
    return [json.loads(kv.value) for kv in kvs]
