"""The mirrored disks of the guests this node runs (see
:mod:`corral.node.hypervisor.kvm.guest_mirrors`)."""

from __future__ import annotations

from corral import errors
from corral.disk_description import DiskDescription
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.hypervisor import CLASSES, get_hypervisor
from corral.node.storage import mirrored
from corral.rpc import calls_mirror as calls
from corral.rpc.wire import DiskWire, MirrorFaultWire


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


# The resyncs running here: (root, instance, disk) → [copied, in all].
_RESYNCS: dict[tuple[str, str, str], list[int]] = {}


@rpc_handler(calls.mirror_resync)
async def mirror_resync(ctx: NodeContext, hypervisor: str, instance: str, disk: DiskWire) -> None:
    """Bring the secondary copy up to date; its progress meanwhile in
    mirror_resync_progress."""
    description = DiskDescription.from_wire(disk)
    if mirrored.role(ctx.paths, description) != 0:
        raise errors.OpExecError(
            f"Disk {description.iv_name or description.uuid} of {instance} is resynced by"
            " its primary node"
        )
    peer = mirrored.link(description)
    key = (str(ctx.paths.root), instance, description.uuid)
    if key in _RESYNCS:
        raise errors.OpExecError(f"Disk {disk} of {instance} is being resynced already")
    progress = _RESYNCS[key] = [0, 0]

    def told(done: int, total: int) -> None:
        progress[:] = [done, total]

    try:
        await get_hypervisor(hypervisor, ctx.paths).mirror_resync(instance, peer, told)
    finally:
        del _RESYNCS[key]


@rpc_handler(calls.mirror_resync_progress)
async def mirror_resync_progress(ctx: NodeContext, instance: str, disk: str) -> list[int] | None:
    """How far the resync of the disk is."""
    progress = _RESYNCS.get((str(ctx.paths.root), instance, disk))
    return None if progress is None else list(progress)
