"""Calls of the node's etcd member (:mod:`corral.node.etcd_member`)."""

from __future__ import annotations

import asyncio
from typing import Any

from corral import errors
from corral.node.context import NodeContext
from corral.node.etcd_member import MemberWish, keeper
from corral.node.handlers.base import rpc_handler
from corral.rpc import calls_etcd as calls
from corral.state import home as store_home


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


@rpc_handler(calls.store_home_put)
async def store_home_put(ctx: NodeContext, home: dict[str, Any] | None) -> None:
    path = ctx.paths.store_home
    if home is None:
        await asyncio.to_thread(path.unlink, missing_ok=True)
        return
    try:
        where = store_home.of_wire(home)
    except (ValueError, KeyError, TypeError) as err:
        raise errors.ParameterError(f"store_home_put: not a store home: {err}") from None
    await asyncio.to_thread(store_home.write, path, where)
