"""noded's RPC handlers, one module per domain; importing this registers them all.

A handler is ``@rpc_handler(call) async def h(ctx: NodeContext, *args) -> payload``
with the parameters and result of the call's declaration (``corral/rpc/calls_*.py``:
mypy checks both against it); noded has checked the arguments' types before.
It raises to fail the call: noded turns the exception into ``[false, "<message>"]``.
"""

from __future__ import annotations

from corral import errors
from corral.node.handlers import (  # noqa: F401  (registration)
    admin,
    backup,
    console,
    crypto,
    etcd,
    fanout,
    files,
    hooks,
    impexp,
    info,
    instance,
    master_ip,
    membership,
    migration,
    mirror,
    oob,
    operator,
    osdef,
    osmedia,
    storage,
    test,
    transfer,
)
from corral.node.handlers.base import HANDLERS, Handler, rpc_handler
from corral.rpc.calls import CALLS

__all__ = ["HANDLERS", "Handler", "get_handler", "rpc_handler"]

_missing = set(CALLS) - set(HANDLERS)
if _missing:
    raise errors.ProgrammerError(f"RPC calls without a handler: {', '.join(sorted(_missing))}")


def get_handler(name: str) -> Handler | None:
    """The handler of the call ``name``, or None if there is no such call."""
    return HANDLERS.get(name)
