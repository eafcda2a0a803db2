"""Node group opcodes (Ganeti 3.0.2's fields, types and defaults)."""

from __future__ import annotations

from typing import Literal

from corral.opcodes.base import OpCode
from corral.opcodes.types import DiskParamsTemplate, NonEmptyStr, Params, not_built

AllocPolicy = Literal["preferred", "last_resort", "unallocable"]


class _GroupOp(OpCode):
    OP_DSC_FIELD = "group_name"

    group_name: NonEmptyStr


class _GroupParams(_GroupOp):
    """The parameters a group is created with, or changed."""

    alloc_policy: AllocPolicy | None = None
    ndparams: Params | None = None
    diskparams: dict[DiskParamsTemplate, Params] | None = None
    hv_state: Params | None = not_built(None, {})
    disk_state: Params | None = not_built(None, {})
    ipolicy: Params | None = None


class OpGroupAdd(_GroupParams):
    """Add a node group."""

    OP_ID = "OP_GROUP_ADD"


class OpGroupSetParams(_GroupParams):
    """Change a node group's parameters."""

    OP_ID = "OP_GROUP_SET_PARAMS"


class OpGroupRemove(_GroupOp):
    """Remove an empty node group."""

    OP_ID = "OP_GROUP_REMOVE"


class OpGroupRename(OpCode):
    """Rename a node group."""

    OP_ID = "OP_GROUP_RENAME"

    group_name: NonEmptyStr
    new_name: NonEmptyStr


class OpGroupAssignNodes(_GroupOp):
    """Move nodes into a node group."""

    OP_ID = "OP_GROUP_ASSIGN_NODES"

    force: bool = False
    nodes: list[NonEmptyStr]
    node_uuids: list[NonEmptyStr] | None = None


class OpGroupEvacuate(_GroupOp):
    """Move a group's instances to other groups."""

    OP_ID = "OP_GROUP_EVACUATE"

    early_release: bool = False
    iallocator: NonEmptyStr | None = None
    target_groups: list[NonEmptyStr] | None = None
    sequential: bool = False
    force_failover: bool = False


class OpGroupVerifyDisks(_GroupOp):
    """Check the disks of a group's instances."""

    OP_ID = "OP_GROUP_VERIFY_DISKS"
