"""Every node call, by name: the declarations of the topic modules in one table.

A call is declared once, as a typed signature (:mod:`corral.rpc.declare`),
in the module of its topic; noded dispatches it to the handler registered
for it (:mod:`corral.node.handlers`).  Adding a call is one declaration and
one handler.

Stdlib only (and typing_extensions): masterd and noded import it.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from corral import errors
from corral.rpc import (
    calls_admin,
    calls_console,
    calls_crypto,
    calls_etcd,
    calls_fanout,
    calls_impexp,
    calls_instance,
    calls_master_ip,
    calls_membership,
    calls_migration,
    calls_mirror,
    calls_node,
    calls_operator,
    calls_os,
    calls_osmedia,
    calls_storage,
    calls_transfer,
)
from corral.rpc.declare import NodeCall

_MODULES: tuple[ModuleType, ...] = (
    calls_node,
    calls_os,
    calls_osmedia,
    calls_instance,
    calls_storage,
    calls_admin,
    calls_fanout,
    calls_membership,
    calls_crypto,
    calls_migration,
    calls_transfer,
    calls_console,
    calls_impexp,
    calls_operator,
    calls_etcd,
    calls_master_ip,
    calls_mirror,
)

CALLS: dict[str, NodeCall[..., Any]] = {
    call.name: call
    for module in _MODULES
    for call in vars(module).values()
    if isinstance(call, NodeCall)
}


def get_call(name: str) -> NodeCall[..., Any]:
    """The call named ``name``; ProgrammerError if there is none."""
    try:
        return CALLS[name]
    except KeyError:
        raise errors.ProgrammerError(f"Unknown RPC call {name!r}") from None
