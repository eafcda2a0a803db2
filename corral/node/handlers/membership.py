"""Calls of node membership: ssconf files from the master, leaving the
candidate pool, leaving the cluster."""

from __future__ import annotations

import asyncio
import math

from corral import errors
from corral.fileio import atomic_write
from corral.node import etcd_member
from corral.node.candidate_files import forget_master_files
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.join_server import write_ssconf_values
from corral.paths import Paths
from corral.rpc import calls_membership as calls


@rpc_handler(calls.write_ssconf_files)
async def write_ssconf_files(ctx: NodeContext, values: dict[str, str]) -> None:
    """Write the ssconf files the master sends (``{key: content}``)."""
    await asyncio.to_thread(write_ssconf_values, ctx.paths, values)


def _keep_pause(paths: Paths, until: float | None) -> None:
    if until is None:
        paths.watcher_pause_seen.unlink(missing_ok=True)
    else:
        atomic_write(paths.watcher_pause_seen, f"{until}\n".encode(), mode=0o644)


@rpc_handler(calls.set_watcher_pause)
async def set_watcher_pause(ctx: NodeContext, until: float | None) -> None:
    """Keep the pause where this node's watcher reads it when masterd is not here."""
    if until is not None and (
        isinstance(until, bool) or not isinstance(until, int | float) or not math.isfinite(until)
    ):
        raise errors.OpExecError(f"set_watcher_pause: invalid time {until!r}")
    await asyncio.to_thread(_keep_pause, ctx.paths, until)


def _is_master(paths: Paths, address: str) -> bool:
    """Whether this node's ssconf files name it the master."""
    try:
        master = paths.ssconf_file("master_node").read_text().strip()
        ips = paths.ssconf_file("node_primary_ips").read_text().splitlines()
    except OSError:
        return False
    return any(line.split()[:2] == [master, address] for line in ips)


def _remove_candidate_files(paths: Paths) -> None:
    for path in paths.candidate_files:
        path.unlink(missing_ok=True)
    forget_master_files(paths)


@rpc_handler(calls.node_demote_from_mc)
async def node_demote_from_mc(ctx: NodeContext) -> None:
    """Remove the files only master candidates keep (never on the master)."""
    if await asyncio.to_thread(_is_master, ctx.paths, ctx.address):
        raise errors.OpExecError("ssconf status shows I'm the master node, will not demote")
    await asyncio.to_thread(_remove_candidate_files, ctx.paths)


@rpc_handler(calls.node_leave_cluster)
async def node_leave_cluster(ctx: NodeContext) -> None:
    """Forget the cluster: its files go (its etcd member and data too), and
    noded waits for a join again."""
    if ctx.membership is None:
        raise errors.OpExecError("node_leave_cluster: this node daemon cannot switch modes")
    ctx.membership.leave()
    # After the files went: a start of the member from now on finds no certificate.
    await etcd_member.keeper(ctx.paths).stop(forget=True)
