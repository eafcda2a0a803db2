"""The node calls of mirrored disks under running guests: the faults their
QEMU reports on the primary node, and going on without the secondary copy
once the master has recorded it as outdated."""

# The bodies are the signatures' only: mypy must not ask them for a result.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from corral import constants as C
from corral.rpc.declare import CHANGES, READS, node_call
from corral.rpc.wire import DiskWire, MirrorFaultWire

# The longest a mirror_faults call waits for a fault (its time-out is longer).
FAULTS_WAIT_MAX = 30.0


@node_call(C.RPC_TMO_URGENT, effect=READS)
def mirror_faults(wait: float) -> list[MirrorFaultWire]:
    """The running guests' mirrored disks whose secondary failed (each guest
    paused), oldest first; waits up to ``wait`` seconds (at most
    FAULTS_WAIT_MAX) for one when there is none."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def mirror_degrade(hypervisor: str, instance: str, disk: str) -> None:
    """The guest goes on without disk ``disk``'s (uuid) secondary copy: its
    writes recorded for a resync; resumed once none of its disks waits."""


@node_call(C.RPC_TMO_1DAY, effect=CHANGES)
def mirror_resync(hypervisor: str, instance: str, disk: DiskWire, full: bool) -> None:
    """Copy to the disk's secondary copy (its node's export runs) what it
    missed while the guest wrote alone (all of it when ``full``: a new
    copy), then write both again."""


@node_call(C.RPC_TMO_1DAY, effect=CHANGES)
def mirror_copy(instance: str, disk: DiskWire) -> None:
    """Copy all of the stopped instance's copy of the disk to its secondary
    copy (its node's export runs)."""


@node_call(C.RPC_TMO_URGENT, effect=READS)
def mirror_resync_progress(instance: str, disk: str) -> list[int] | None:
    """``[bytes copied, bytes in all]`` of a running mirror_resync (None: none runs)."""
