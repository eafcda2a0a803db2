"""The mirrored disks whose primary this node is: the faults of the guests
it runs (see :mod:`corral.node.hypervisor.kvm.guest_mirrors`), and the
resyncs of their outdated secondary copies, under a running guest or (the
instance stopped) a whole copy (:mod:`corral.node.storage.mirror_copy`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from corral import errors
from corral.disk_description import DiskDescription
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.hypervisor import CLASSES, get_hypervisor
from corral.node.storage import mirror_copy as mirror_copy_to
from corral.node.storage import mirrored
from corral.node.storage.mirror_copy import Progress
from corral.node.storage.mirrored import MIB, Link
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


@contextlib.contextmanager
def _resyncing(
    ctx: NodeContext, instance: str, disk: DiskWire
) -> Iterator[tuple[DiskDescription, Link, Progress]]:
    """The disk (this node its primary), its secondary's link, and what is
    told the progress, seen by mirror_resync_progress while the block runs."""
    description = DiskDescription.from_wire(disk)
    if mirrored.role(ctx.paths, description) != 0:
        raise errors.OpExecError(
            f"Disk {description.iv_name or description.uuid} of {instance} is resynced by"
            " its primary node"
        )
    key = (str(ctx.paths.root), instance, description.uuid)
    if key in _RESYNCS:
        raise errors.OpExecError(
            f"Disk {description.iv_name or description.uuid} of {instance} is being resynced"
            " already"
        )
    progress = _RESYNCS[key] = [0, 0]

    def told(done: int, total: int) -> None:
        progress[:] = [done, total]

    try:
        yield description, mirrored.link(description), told
    finally:
        del _RESYNCS[key]


@rpc_handler(calls.mirror_resync)
async def mirror_resync(
    ctx: NodeContext, hypervisor: str, instance: str, disk: DiskWire, full: bool
) -> None:
    """Bring the secondary copy up to date under the running guest; its
    progress meanwhile in mirror_resync_progress."""
    with _resyncing(ctx, instance, disk) as (_, peer, told):
        await get_hypervisor(hypervisor, ctx.paths).mirror_resync(instance, peer, told, full)


@rpc_handler(calls.mirror_copy)
async def mirror_copy(ctx: NodeContext, instance: str, disk: DiskWire) -> None:
    """Copy all of the stopped instance's copy to the secondary's; its
    progress meanwhile in mirror_resync_progress."""
    with _resyncing(ctx, instance, disk) as (description, peer, told):
        image = mirrored.MirroredTemplate(ctx.paths).attach(description)
        await mirror_copy_to.copy_all(ctx.paths, image, peer, description.size * MIB, told)


@rpc_handler(calls.mirror_resync_progress)
async def mirror_resync_progress(ctx: NodeContext, instance: str, disk: str) -> list[int] | None:
    """How far the resync of the disk is."""
    progress = _RESYNCS.get((str(ctx.paths.root), instance, disk))
    return None if progress is None else list(progress)
