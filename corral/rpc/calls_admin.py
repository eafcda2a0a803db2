"""Node calls of node administration (``gnt-node list-storage``)."""

# The bodies are the signatures' only: mypy must not ask them for a result.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from corral import constants as C
from corral.rpc.declare import READS, node_call
from corral.rpc.wire import StorageUnitWire, StorageUsage


@node_call(C.RPC_TMO_NORMAL, effect=READS)
def file_storage_usage(storage_unit: StorageUnitWire) -> StorageUsage:
    """Size, use and free space of the directory of a file storage unit."""
