"""The node calls that let a query ask a node about named objects only.

``gnt-instance list web1`` needs one instance's state: its primary node reads
that instance's state, not those of all its instances (``all_instances_info``).
"""

from __future__ import annotations

from corral import constants as C
from corral.rpc.calls import RpcCall

FANOUT_CALLS = (
    RpcCall(
        "instances_info",
        C.RPC_TMO_URGENT,
        ("hypervisor", "names"),
        "Which of the named instances run, as all_instances_info reports them",
    ),
)
