"""Which module holds each opcode's logical unit: a unit's module is
imported when its opcode first runs, not at masterd's start, so that masterd
holds the code of the operations it is asked for (all of them: some 5 MB).

A unit registers itself with its opcode when its class is made; a test checks
that this table and the registrations agree.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import TYPE_CHECKING, Any

from corral.cmdlib.base import lu_class

if TYPE_CHECKING:
    from corral.cmdlib.base import LogicalUnit

PACKAGE = "corral.cmdlib"
# Module (under corral.cmdlib) → the opcodes whose units it holds.
MODULES: dict[str, tuple[str, ...]] = {
    "backup_export": ("OP_BACKUP_EXPORT",),
    "backup_prepare": ("OP_BACKUP_PREPARE",),
    "backup_remove": ("OP_BACKUP_REMOVE",),
    "cluster": (
        "OP_CLUSTER_DESTROY",
        "OP_CLUSTER_POST_INIT",
        "OP_CLUSTER_QUERY",
        "OP_CLUSTER_SET_PARAMS",
    ),
    "cluster_crypto": ("OP_CLUSTER_RENEW_CRYPTO",),
    "cluster_disks": ("OP_CLUSTER_REPAIR_DISK_SIZES", "OP_CLUSTER_VERIFY_DISKS"),
    "cluster_mip": ("OP_CLUSTER_ACTIVATE_MASTER_IP", "OP_CLUSTER_DEACTIVATE_MASTER_IP"),
    "cluster_rename": ("OP_CLUSTER_RENAME",),
    "cluster_verify": ("OP_CLUSTER_VERIFY", "OP_CLUSTER_VERIFY_CONFIG", "OP_CLUSTER_VERIFY_GROUP"),
    "extstorage": ("OP_EXT_STORAGE_DIAGNOSE",),
    "group": (
        "OP_GROUP_ADD",
        "OP_GROUP_ASSIGN_NODES",
        "OP_GROUP_REMOVE",
        "OP_GROUP_RENAME",
        "OP_GROUP_SET_PARAMS",
        "OP_GROUP_VERIFY_DISKS",
    ),
    "group_evacuate": ("OP_GROUP_EVACUATE",),
    "instance": ("OP_INSTANCE_REMOVE", "OP_INSTANCE_RENAME"),
    "instance_console": ("OP_INSTANCE_CONSOLE",),
    "instance_create": ("OP_INSTANCE_CREATE",),
    "instance_disks": (
        "OP_INSTANCE_ACTIVATE_DISKS",
        "OP_INSTANCE_DEACTIVATE_DISKS",
        "OP_INSTANCE_RECREATE_DISKS",
    ),
    "instance_migration": ("OP_INSTANCE_FAILOVER", "OP_INSTANCE_MIGRATE"),
    "mirror_replace": ("OP_INSTANCE_REPLACE_DISKS",),
    "instance_move": ("OP_INSTANCE_MOVE",),
    "instance_operation": (
        "OP_INSTANCE_REBOOT",
        "OP_INSTANCE_REINSTALL",
        "OP_INSTANCE_SHUTDOWN",
        "OP_INSTANCE_STARTUP",
    ),
    "instance_query": ("OP_INSTANCE_QUERY_DATA",),
    "instance_set_params": ("OP_INSTANCE_GROW_DISK", "OP_INSTANCE_SET_PARAMS"),
    "network": ("OP_NETWORK_ADD", "OP_NETWORK_REMOVE", "OP_NETWORK_SET_PARAMS"),
    "network_connect": ("OP_NETWORK_CONNECT", "OP_NETWORK_DISCONNECT"),
    "node": ("OP_NODE_POWERCYCLE", "OP_NODE_SET_PARAMS"),
    "node_membership": ("OP_CLUSTER_REDIST_CONF", "OP_NODE_ADD", "OP_NODE_REMOVE"),
    "node_moves": ("OP_NODE_EVACUATE", "OP_NODE_MIGRATE"),
    "node_storage": (
        "OP_NODE_MODIFY_STORAGE",
        "OP_NODE_QUERYVOLS",
        "OP_NODE_QUERY_STORAGE",
        "OP_REPAIR_NODE_STORAGE",
    ),
    "oob": ("OP_OOB_COMMAND",),
    "operating_system": ("OP_OS_DIAGNOSE",),
    "tags": ("OP_TAGS_DEL", "OP_TAGS_GET", "OP_TAGS_SEARCH", "OP_TAGS_SET"),
    "test": ("OP_TEST_DELAY", "OP_TEST_JQUEUE", "OP_TEST_OS_PARAMS"),
}
_MODULE_OF = {op_id: module for module, op_ids in MODULES.items() for op_id in op_ids}


async def unit_for(op_id: str) -> type[LogicalUnit[Any]] | None:
    """The logical unit of ``op_id`` (None: Corral has none), its module
    imported in a thread the first time (reading it must not block the loop)."""
    cls = lu_class(op_id)
    module = _MODULE_OF.get(op_id)
    if cls is None and module is not None:
        await asyncio.to_thread(importlib.import_module, f"{PACKAGE}.{module}")
        cls = lu_class(op_id)
    return cls


def load_all() -> None:
    """Import every unit's module (tests, tools that list the units)."""
    for module in MODULES:
        importlib.import_module(f"{PACKAGE}.{module}")
