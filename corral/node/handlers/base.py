"""The registry of RPC handlers, filled by the ``@rpc_handler`` decorator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from corral import errors
from corral.node.context import NodeContext
from corral.rpc.calls import CALLS
from corral.rpc.declare import NodeCall

P = ParamSpec("P")
R = TypeVar("R")

Handler = Callable[..., Awaitable[Any]]

HANDLERS: dict[str, Handler] = {}


def rpc_handler(
    call: NodeCall[P, R],
) -> Callable[
    [Callable[Concatenate[NodeContext, P], Awaitable[R]]],
    Callable[Concatenate[NodeContext, P], Awaitable[R]],
]:
    """Register the decorated ``async def h(ctx, *args)`` as the handler of
    ``call``: mypy checks its parameters and result against the declaration."""
    if CALLS.get(call.name) is not call:
        raise errors.ProgrammerError(f"Handler for {call!r}, which is not in the call table")

    def register(
        func: Callable[Concatenate[NodeContext, P], Awaitable[R]],
    ) -> Callable[Concatenate[NodeContext, P], Awaitable[R]]:
        if call.name in HANDLERS:
            raise errors.ProgrammerError(f"Two handlers for the RPC call {call.name!r}")
        HANDLERS[call.name] = func
        return func

    return register
