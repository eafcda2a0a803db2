"""Node opcodes but OP_NODE_ADD/OP_NODE_REMOVE (Ganeti 3.0.2's fields, types
and defaults)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from corral import constants as C
from corral.opcodes.base import OpCode
from corral.opcodes.types import NonEmptyStr, Params, not_built

StorageType = Literal[
    "blockdev", "sharedfile", "rados", "gluster", "lvm-vg", "file", "diskless", "ext", "lvm-pv"
]
EvacMode = Literal["primary-only", "secondary-only", "all"]
MigrationMode = Literal["live", "non-live"]
OobCommand = Literal["health", "power-cycle", "power-off", "power-on", "power-status"]


class _NodeOp(OpCode):
    """An opcode about one node, named (or given by uuid)."""

    OP_DSC_FIELD: ClassVar[str | None] = "node_name"

    node_name: NonEmptyStr
    node_uuid: NonEmptyStr | None = None


class OpNodeSetParams(_NodeOp):
    """Change a node's flags and parameters."""

    OP_ID = "OP_NODE_SET_PARAMS"

    force: bool = False
    hv_state: Params | None = not_built(None, {})
    disk_state: Params | None = not_built(None, {})
    master_candidate: bool | None = None
    offline: bool | None = None
    drained: bool | None = None
    auto_promote: bool = False
    master_capable: bool | None = None
    vm_capable: bool | None = None
    secondary_ip: NonEmptyStr | None = None
    ndparams: Params | None = None
    powered: bool | None = None


class OpNodeQueryvols(OpCode):
    """The volumes on nodes."""

    OP_ID = "OP_NODE_QUERYVOLS"

    output_fields: list[NonEmptyStr]
    nodes: list[NonEmptyStr] = Field(default_factory=list)


class OpNodeQueryStorage(OpCode):
    """The storage units of nodes."""

    OP_ID = "OP_NODE_QUERY_STORAGE"

    output_fields: list[NonEmptyStr]
    storage_type: StorageType | None = None
    nodes: list[NonEmptyStr] = Field(default_factory=list)
    name: NonEmptyStr | None = None


class OpNodeModifyStorage(_NodeOp):
    """Change a storage unit of a node."""

    OP_ID = "OP_NODE_MODIFY_STORAGE"

    storage_type: StorageType
    name: NonEmptyStr | None = None
    changes: Params


class OpRepairNodeStorage(_NodeOp):
    """Repair a storage unit of a node."""

    OP_ID = "OP_REPAIR_NODE_STORAGE"

    storage_type: StorageType
    name: NonEmptyStr | None = None
    ignore_consistency: bool = False


class OpNodePowercycle(_NodeOp):
    """Power-cycle a node."""

    OP_ID = "OP_NODE_POWERCYCLE"

    force: bool = False


class OpNodeEvacuate(OpCode):
    """Move the instances off a node (its logical unit comes later)."""

    OP_ID = "OP_NODE_EVACUATE"
    OP_DSC_FIELD = "node_name"

    early_release: bool = False
    node_name: NonEmptyStr
    node_uuid: NonEmptyStr | None = None
    remote_node: NonEmptyStr | None = None
    remote_node_uuid: NonEmptyStr | None = None
    iallocator: NonEmptyStr | None = None
    mode: EvacMode
    ignore_soft_errors: bool | None = None


class OpNodeMigrate(_NodeOp):
    """Migrate a node's primary instances (its logical unit comes later)."""

    OP_ID = "OP_NODE_MIGRATE"

    mode: MigrationMode | None = None
    live: bool | None = None
    target_node: NonEmptyStr | None = None
    target_node_uuid: NonEmptyStr | None = None
    allow_runtime_changes: bool = True
    ignore_ipolicy: bool = False
    iallocator: NonEmptyStr | None = None


class OpOobCommand(OpCode):
    """Run the nodes' out-of-band program (power, health), on the master."""

    OP_ID = "OP_OOB_COMMAND"

    node_names: list[NonEmptyStr] = Field(default_factory=list)
    node_uuids: list[NonEmptyStr] | None = None
    command: OobCommand
    # Any integer and any number, as Ganeti's types: the logical unit refuses
    # what cannot be a timeout or a delay.
    timeout: int = C.OOB_TIMEOUT
    ignore_status: bool = False
    power_delay: float = C.OOB_POWER_DELAY
