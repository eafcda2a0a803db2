"""Node calls that run OS definitions."""

# The bodies are the signatures' only: mypy must not ask them for a result.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from corral import constants as C
from corral.rpc.declare import CHANGES, READS, node_call
from corral.rpc.wire import InstanceWire, JsonObject, OsSpecWire


@node_call(C.RPC_TMO_FAST, effect=READS)
def os_diagnose() -> list[JsonObject]:
    """Every OS definition in the search path (``corral.osdef.definition.diagnose``)."""


@node_call(C.RPC_TMO_FAST, effect=READS)
def os_validate(spec: OsSpecWire, debug: int) -> bool:
    """Check the OS's parameters against parameters.list and the verify script."""


@node_call(C.RPC_TMO_1DAY, effect=CHANGES)
def instance_os_add(inst: InstanceWire, reinstall: bool, debug: int) -> bool:
    """Run the OS create script (``inst`` carries its OS spec)."""


@node_call(C.RPC_TMO_SLOW, effect=CHANGES)
def instance_run_rename(inst: InstanceWire, old_name: str, debug: int) -> bool:
    """Run the OS rename script (``inst`` carries its OS spec)."""
