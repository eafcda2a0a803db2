"""The node calls that let a query ask a node about named objects only.

``gnt-instance list web1`` needs one instance's state: its primary node reads
that instance's state, not those of all its instances (``all_instances_info``).
"""

# The bodies are the signatures' only: mypy must not ask them for a result.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from corral import constants as C
from corral.rpc.declare import READS, node_call
from corral.rpc.wire import RunningInstance


@node_call(C.RPC_TMO_URGENT, effect=READS)
def instances_info(hypervisor: str, names: list[str]) -> dict[str, RunningInstance]:
    """Which of the named instances run, as all_instances_info reports them."""
