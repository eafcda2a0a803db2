"""The target's calls of a disk copy between two nodes
(:mod:`corral.node.transfer_receive`); the bytes move on the import/export
engine."""

from __future__ import annotations

from corral.node import transfer_receive
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.rpc import calls_transfer as calls
from corral.rpc.wire import DiskWire, TransferFinished


@rpc_handler(calls.transfer_prepare)
async def prepare_transfer(
    ctx: NodeContext, transfer_id: str, disks: list[DiskWire], ttl: float
) -> None:
    await transfer_receive.prepare(ctx, transfer_id, disks, ttl)


@rpc_handler(calls.transfer_touch)
async def touch_transfer(ctx: NodeContext, transfer_id: str) -> bool:
    """Renew a transfer (its time-to-live starts again); whether it is known."""
    return transfer_receive.touch(transfer_receive.check_id(transfer_id))


@rpc_handler(calls.transfer_finish)
async def finish_transfer(ctx: NodeContext, transfer_id: str, success: bool) -> TransferFinished:
    """Keep or remove the disks of a transfer; an unknown id is fine (a
    retried clean-up, or a node that restarted and already cleaned up)."""
    tid = transfer_receive.check_id(transfer_id)
    received = await transfer_receive.finish(ctx.paths, tid, success)
    return {"received": received}
