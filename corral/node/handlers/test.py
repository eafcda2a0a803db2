"""Calls for testing the RPC machinery itself."""

from __future__ import annotations

import asyncio

from corral import errors
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.rpc import calls_node as calls


@rpc_handler(calls.test_delay)
async def test_delay(ctx: NodeContext, duration: float) -> None:
    """Sleep ``duration`` seconds, then succeed."""
    if isinstance(duration, bool) or not isinstance(duration, int | float) or duration < 0:
        raise errors.OpExecError(f"Invalid delay duration {duration!r}")
    await asyncio.sleep(duration)
