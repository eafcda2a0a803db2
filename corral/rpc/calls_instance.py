"""Node calls that start, stop and report instances."""

# The bodies are the signatures' only: mypy must not ask them for a result.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral.rpc.declare import CHANGES, READS, node_call
from corral.rpc.wire import HypervisorInfo, InstanceWire, RunningInstance, StorageUnitWire


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def instance_start(inst: InstanceWire, paused: bool) -> None:
    """Start an instance.  With a communication NIC, ``inst`` carries its
    ``osspec`` (public and private parameters, never secret ones), which the
    node's corral-metad serves the guest (:mod:`corral.node.metad_feed`)."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def instance_shutdown(hypervisor: str, name: str, timeout: int) -> None:
    """Stop an instance."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def instance_reboot(inst: InstanceWire, reboot_type: str, timeout: int) -> None:
    """Reboot an instance (soft or hard)."""


@node_call(C.RPC_TMO_FAST, effect=CHANGES)
def instance_rename(hypervisor: str, old_name: str, new_name: str) -> None:
    """Let the hypervisor follow an instance rename."""


@node_call(C.RPC_TMO_URGENT, effect=READS)
def all_instances_info(hypervisors: list[str]) -> dict[str, RunningInstance]:
    """Running instances of these hypervisors, by name."""


@node_call(C.RPC_TMO_NORMAL, effect=READS)
def hypervisor_validate_params(hvname: str, hvparams: dict[str, Any]) -> None:
    """Check hypervisor parameters against the node (files, users, QEMU)."""


@node_call(C.RPC_TMO_URGENT, effect=READS)
def hypervisor_info(hypervisor: str, storage_unit: StorageUnitWire) -> HypervisorInfo:
    """Memory and the space of ``storage_unit`` as the hypervisor and storage see them."""
