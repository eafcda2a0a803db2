"""OP_NODE_ADD and OP_NODE_REMOVE (Ganeti 3.0.2's fields, types and defaults)."""

from __future__ import annotations

from corral.opcodes.base import OpCode
from corral.opcodes.types import NonEmptyStr, Params, not_built


class OpNodeAdd(OpCode):
    """Add a node (or, with ``readd``, let a node of the config rejoin).

    ``primary_ip``: Ganeti fills it from the name; Corral takes it when given
    (``gnt-node add --node-ip``), so that names need not resolve.
    """

    OP_ID = "OP_NODE_ADD"
    OP_DSC_FIELD = "node_name"

    node_name: NonEmptyStr
    hv_state: Params | None = not_built(None, {})
    disk_state: Params | None = not_built(None, {})
    primary_ip: NonEmptyStr | None = None
    secondary_ip: NonEmptyStr | None = None
    readd: bool = False
    group: NonEmptyStr | None = None
    master_capable: bool | None = None
    vm_capable: bool | None = None
    ndparams: Params | None = None
    # Ganeti's own tools send it; the SSH set-up it asks for does not exist here.
    node_setup: bool = False


class OpNodeRemove(OpCode):
    """Remove a node that holds no instances (not the master)."""

    OP_ID = "OP_NODE_REMOVE"
    OP_DSC_FIELD = "node_name"

    node_name: NonEmptyStr
    node_uuid: NonEmptyStr | None = None
