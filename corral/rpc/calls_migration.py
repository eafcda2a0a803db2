"""The node RPC calls of a live migration (Ganeti's names and arguments).

The master drives them: ``migration_info`` on the source, ``accept_instance``
on the target, ``instance_migrate`` and ``instance_get_migration_status`` on
the source, then both finalize calls (``success=False``: abort).
"""

from __future__ import annotations

from corral import constants as C
from corral.rpc.calls import RpcCall

MIGRATION_CALLS = (
    RpcCall(
        "instance_migratable",
        C.RPC_TMO_NORMAL,
        ("instance",),
        "Whether the instance runs here and can be migrated",
    ),
    RpcCall(
        "migration_info",
        C.RPC_TMO_NORMAL,
        ("instance",),
        "What the target needs to accept the instance",
    ),
    RpcCall(
        "accept_instance",
        C.RPC_TMO_NORMAL,
        ("instance", "info", "target"),
        "Prepare the target node to receive the instance",
    ),
    RpcCall(
        "instance_finalize_migration_dst",
        C.RPC_TMO_NORMAL,
        ("instance", "info", "success"),
        "On the target: run the received instance, or drop it",
    ),
    RpcCall(
        "instance_migrate",
        C.RPC_TMO_SLOW,
        # accepted: the target's answer to accept_instance (Corral's addition:
        # the port the target chose, ...).
        ("cluster_name", "instance", "target", "live", "accepted"),
        "Send the running instance to the target",
    ),
    RpcCall(
        "instance_finalize_migration_src",
        C.RPC_TMO_SLOW,
        ("instance", "success", "live"),
        "On the source: forget the migrated instance, or keep it running",
    ),
    RpcCall(
        "instance_get_migration_status",
        C.RPC_TMO_SLOW,
        ("instance",),
        "The migration's status as the source sees it",
    ),
)
