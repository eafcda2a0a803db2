"""Calls of node membership: ssconf files from the master, leaving the cluster."""

from __future__ import annotations

import asyncio

from corral import errors
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.join_server import write_ssconf_values
from corral.rpc import calls_membership as calls


@rpc_handler(calls.write_ssconf_files)
async def write_ssconf_files(ctx: NodeContext, values: dict[str, str]) -> None:
    """Write the ssconf files the master sends (``{key: content}``)."""
    await asyncio.to_thread(write_ssconf_values, ctx.paths, values)


@rpc_handler(calls.node_leave_cluster)
async def node_leave_cluster(ctx: NodeContext) -> None:
    """Forget the cluster: its files go, and noded waits for a join again."""
    if ctx.membership is None:
        raise errors.OpExecError("node_leave_cluster: this node daemon cannot switch modes")
    ctx.membership.leave()
