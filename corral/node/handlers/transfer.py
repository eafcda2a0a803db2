"""The calls of a disk copy between two nodes: the target prepares and
receives (:mod:`corral.node.transfer_receive`), the source sends
(:mod:`corral.node.transfer_send`)."""

from __future__ import annotations

from typing import Any

from corral.node import transfer_receive, transfer_send
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler


@rpc_handler("transfer_prepare")
async def prepare_transfer(ctx: NodeContext, transfer_id: Any, disks: Any, ttl: Any) -> None:
    await transfer_receive.prepare(ctx, transfer_id, disks, ttl)


@rpc_handler("transfer_send")
async def send_transfer(ctx: NodeContext, transfer_id: Any, target: Any, disks: Any) -> None:
    await transfer_send.send(ctx, transfer_id, target, disks)


@rpc_handler("transfer_status")
async def transfer_status(ctx: NodeContext, transfer_id: Any, wait: Any) -> dict[str, Any]:
    return await transfer_send.status(transfer_id, wait)


@rpc_handler("transfer_finish")
async def finish_transfer(ctx: NodeContext, transfer_id: Any, success: Any) -> dict[str, bool]:
    """Each role this node had in the transfer ends; an unknown id is fine
    (a retried clean-up, or a node that restarted and already cleaned up)."""
    tid = transfer_receive.check_id(transfer_id)
    sent = await transfer_send.finish(tid)
    received = await transfer_receive.finish(ctx.paths, tid, success is True)
    return {"sent": sent, "received": received}
