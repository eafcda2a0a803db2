"""The registry of RPC handlers, filled by the ``@rpc_handler`` decorator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from corral import errors
from corral.rpc.calls import CALLS

Handler = Callable[..., Awaitable[Any]]
H = TypeVar("H", bound=Handler)

HANDLERS: dict[str, Handler] = {}


def rpc_handler(name: str) -> Callable[[H], H]:
    """Register the decorated ``async def h(ctx, *args)`` for the call ``name``."""
    if name not in CALLS:
        raise errors.ProgrammerError(f"Handler for {name!r}, which is not in the call table")

    def register(func: H) -> H:
        if name in HANDLERS:
            raise errors.ProgrammerError(f"Two handlers for the RPC call {name!r}")
        HANDLERS[name] = func
        return func

    return register
