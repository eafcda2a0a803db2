"""The node RPC call that describes instances' consoles (Ganeti's
``instance_console_info``: every asked instance of the node in one call)."""

from __future__ import annotations

from corral import constants as C
from corral.rpc.calls import RpcCall

CONSOLE_CALLS = (
    RpcCall(
        "instance_console",
        C.RPC_TMO_URGENT,
        ("instances", "node_name"),
        "How to reach the consoles of instances running on the node",
    ),
)
