"""Every logical unit: importing this module registers them all (a unit
registers itself with its opcode when its class is made)."""

from __future__ import annotations

from corral.cmdlib import (  # noqa: F401
    backup_export,
    backup_prepare,
    backup_remove,
    cluster,
    cluster_crypto,
    cluster_disks,
    cluster_rename,
    cluster_verify,
    extstorage,
    group,
    group_evacuate,
    instance,
    instance_console,
    instance_create,
    instance_disks,
    instance_migration,
    instance_move,
    instance_operation,
    instance_query,
    instance_set_params,
    network,
    network_connect,
    node,
    node_membership,
    node_moves,
    node_storage,
    oob,
    operating_system,
    tags,
    test,
)
