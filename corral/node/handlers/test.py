"""Calls for testing the RPC machinery itself."""

from __future__ import annotations

import asyncio
from typing import Any

from corral import errors
from corral.node import transfer_send
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler


@rpc_handler("test_delay")
async def test_delay(ctx: NodeContext, duration: float) -> None:
    """Sleep ``duration`` seconds, then succeed."""
    if isinstance(duration, bool) or not isinstance(duration, int | float) or duration < 0:
        raise errors.OpExecError(f"Invalid delay duration {duration!r}")
    await asyncio.sleep(duration)


@rpc_handler("test_tls_copy")
async def test_tls_copy(ctx: NodeContext, target: Any, size: Any) -> dict[str, Any]:
    """Send ``size`` bytes to the noded at ``target``, which drops them
    (the plain TLS copy the move benchmark compares with)."""
    return await transfer_send.tls_copy(ctx, target, size)


@rpc_handler("test_transfer_gate")
async def test_transfer_gate(ctx: NodeContext, closed: Any) -> None:
    """Close (pause each disk send after its first chunk) or open the gate."""
    if closed is True:
        transfer_send.GATE.open.clear()
    elif closed is False:
        transfer_send.GATE.open.set()
    else:
        raise errors.OpExecError(f"Invalid gate state {closed!r}")
