"""The mirrored disks of the guests this node runs (see
:mod:`corral.node.hypervisor.kvm.guest_mirrors`)."""

from __future__ import annotations

from corral import errors
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.hypervisor import CLASSES, get_hypervisor
from corral.rpc import calls_mirror as calls
from corral.rpc.wire import MirrorFaultWire


@rpc_handler(calls.mirror_faults)
async def mirror_faults(ctx: NodeContext, wait: float) -> list[MirrorFaultWire]:
    """The faults not decided yet, waiting up to ``wait`` seconds for one."""
    if not 0 <= wait <= calls.FAULTS_WAIT_MAX:
        raise errors.OpExecError(f"Invalid wait {wait!r}: 0 to {calls.FAULTS_WAIT_MAX} seconds")
    # One hypervisor has guests with mirrored disks (kvm): wait on it.
    [name] = [name for name, cls in CLASSES.items() if cls.MIRRORS]
    faults = await get_hypervisor(name, ctx.paths).mirror_faults(wait)
    return [
        {"instance": f.instance, "disk": f.disk, "reason": f.reason, "since": f.since}
        for f in faults
    ]


@rpc_handler(calls.mirror_degrade)
async def mirror_degrade(ctx: NodeContext, hypervisor: str, instance: str, disk: str) -> None:
    """The guest goes on without the disk's secondary copy."""
    await get_hypervisor(hypervisor, ctx.paths).mirror_degrade(instance, disk)
