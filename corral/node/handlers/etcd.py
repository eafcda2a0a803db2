"""Calls of the node's etcd member (:mod:`corral.node.etcd_member`)."""

from __future__ import annotations

from typing import Any

from corral.node.context import NodeContext
from corral.node.etcd_member import MemberWish, keeper
from corral.node.handlers.base import rpc_handler
from corral.rpc import calls_etcd as calls


@rpc_handler(calls.etcd_member_start)
async def etcd_member_start(
    ctx: NodeContext,
    name: str,
    client_port: int,
    peer_port: int,
    initial_cluster: dict[str, str],
    new: bool,
) -> dict[str, Any]:
    """Run the member on the node's own address (its certificate names it)."""
    wish = MemberWish(name, ctx.address, client_port, peer_port, initial_cluster, new)
    return await keeper(ctx.paths).start(wish)


@rpc_handler(calls.etcd_member_stop)
async def etcd_member_stop(ctx: NodeContext, forget: bool) -> None:
    await keeper(ctx.paths).stop(forget=forget)


@rpc_handler(calls.etcd_member_status)
async def etcd_member_status(ctx: NodeContext) -> dict[str, Any]:
    return keeper(ctx.paths).status()
