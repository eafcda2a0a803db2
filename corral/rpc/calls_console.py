"""The node call that describes instances' consoles (Ganeti's
``instance_console_info``: every asked instance of the node in one call)."""

# The bodies are the signatures' only: mypy must not ask them for a result.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from corral import constants as C
from corral.rpc.declare import READS, node_call
from corral.rpc.wire import InstanceWire, JsonObject


@node_call(C.RPC_TMO_URGENT, effect=READS)
def instance_console(instances: list[InstanceWire], node_name: str) -> list[JsonObject]:
    """How to reach the consoles of instances running on the node: Ganeti's
    ``InstanceConsole`` dicts, in the order asked."""
