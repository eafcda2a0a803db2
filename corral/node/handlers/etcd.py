"""Calls of the node's etcd member (:mod:`corral.node.etcd_member`)."""

from __future__ import annotations

import asyncio
from typing import Any

from corral import errors
from corral.node.candidate_files import forget_master_files, write_master_files
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


@rpc_handler(calls.etcd_member_force_new)
async def etcd_member_force_new(ctx: NodeContext) -> dict[str, Any]:
    return await keeper(ctx.paths).force_new()


@rpc_handler(calls.etcd_member_status)
async def etcd_member_status(ctx: NodeContext) -> dict[str, Any]:
    return keeper(ctx.paths).status()


@rpc_handler(calls.candidate_files_put)
async def candidate_files_put(ctx: NodeContext, files: dict[str, Any] | None) -> None:
    paths = ctx.paths
    if files is None:
        await asyncio.to_thread(forget_master_files, paths)
        return
    try:
        where = store_home.of_wire(files["store_home"])
        ca_key, client_pem = (_pem(files, name) for name in ("ca_key", "client_pem"))
    except (ValueError, KeyError, TypeError) as err:
        raise errors.ParameterError(f"candidate_files_put: {err}") from None
    await asyncio.to_thread(write_master_files, paths, where, ca_key, client_pem)


def _pem(files: dict[str, Any], name: str) -> bytes:
    value = files[name]
    if not isinstance(value, str) or "-----BEGIN " not in value:
        raise ValueError(f"{name} is not PEM")
    return value.encode("ascii")
