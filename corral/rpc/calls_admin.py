"""RPC calls of node administration (``gnt-node list-storage``)."""

from __future__ import annotations

from corral import constants as C
from corral.rpc.calls import RpcCall

ADMIN_CALLS = (
    RpcCall(
        "file_storage_usage",
        C.RPC_TMO_NORMAL,
        ("storage_unit",),
        "Size, use and free space of a file storage directory",
    ),
)
