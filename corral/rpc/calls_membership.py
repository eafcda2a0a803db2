"""RPC calls of node membership: ssconf files on every node, leaving the cluster."""

from __future__ import annotations

from corral import constants as C
from corral.rpc.calls import RpcCall

MEMBERSHIP_CALLS = (
    RpcCall(
        "write_ssconf_files",
        C.RPC_TMO_FAST,
        ("values",),
        "Write the ssconf files (key: content) the master sends",
    ),
    RpcCall(
        "node_leave_cluster",
        C.RPC_TMO_URGENT,
        (),
        "Remove the cluster files and wait to join a cluster again",
    ),
)
