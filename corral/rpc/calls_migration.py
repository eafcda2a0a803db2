"""The node calls of a live migration (Ganeti's names and arguments).

The master drives them: ``migration_info`` on the source, ``accept_instance``
on the target, ``instance_migrate`` and ``instance_get_migration_status`` on
the source, then both finalize calls (``success=False``: abort).  What the
source tells the target (``info``) and the target the source (``accepted``)
is the hypervisor's own business: the master passes it on.
"""

# The bodies are the signatures' only: mypy must not ask them for a result.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral.rpc.declare import CHANGES, READS, node_call
from corral.rpc.wire import InstanceWire, JsonObject


@node_call(C.RPC_TMO_NORMAL, effect=READS)
def instance_migratable(instance: InstanceWire) -> None:
    """Whether the instance runs here and can be migrated (fails if not)."""


@node_call(C.RPC_TMO_NORMAL, effect=READS)
def migration_info(instance: InstanceWire) -> Any:
    """What the target needs to accept the instance."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def accept_instance(instance: InstanceWire, info: Any, target: str) -> Any:
    """Prepare the target node to receive the instance (its ``osspec`` as
    :func:`~corral.rpc.calls_instance.instance_start`'s: the target publishes it)."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def instance_finalize_migration_dst(instance: InstanceWire, info: Any, success: bool) -> None:
    """On the target: run the received instance, or drop it."""


@node_call(C.RPC_TMO_SLOW, effect=CHANGES)
def instance_migrate(
    cluster_name: str, instance: InstanceWire, target: str, live: bool, accepted: Any
) -> None:
    """Send the running instance to the target (``accepted``: the target's
    answer to accept_instance, Corral's addition: the port it chose...)."""


@node_call(C.RPC_TMO_SLOW, effect=CHANGES)
def instance_finalize_migration_src(instance: InstanceWire, success: bool, live: bool) -> None:
    """On the source: forget the migrated instance, or keep it running."""


@node_call(C.RPC_TMO_SLOW, effect=READS)
def instance_get_migration_status(instance: InstanceWire) -> JsonObject:
    """The migration's status as the source sees it: ``{"status": ..., ...}``."""
