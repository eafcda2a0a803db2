"""``gnt-instance replace-disks -p`` for mirrored disks: new copies on the
primary node, filled from the secondary's (Ganeti's replace on the primary
for DRBD, for a stopped instance: no guest holds the primary's copies).

The copies to replace are committed as outdated first, so that nothing
starts on them until they are whole again (:func:`instance_disks.link_copies`
refuses).  The old ones go and new ones are made; then, for the copy only,
the roles swap: the primary's node exports its new copy and the secondary's
node copies its own into it, whole (``qemu-img`` over the same TLS link, as
a stopped instance's resync; zeroes sent as write-zeroes).  Then they are
current, with a new sync generation.  A failure half-way leaves them
outdated: another ``replace-disks -p`` finishes the work.
"""

from __future__ import annotations

import asyncio
import copy
from typing import TYPE_CHECKING

from corral import constants as C
from corral import errors
from corral.cmdlib import instance_disks, mirror_sync
from corral.cmdlib import instance_utils as U
from corral.objects import Disk, Instance, Node
from corral.rpc.calls_mirror import mirror_copy
from corral.rpc.calls_storage import (
    blockdev_assemble,
    blockdev_create,
    blockdev_remove,
    blockdev_shutdown,
)
from corral.rpc.wire import DiskWire
from corral.storage import templates

if TYPE_CHECKING:
    from corral.cmdlib.mirror_replace import LUInstanceReplaceDisks


def check(lu: LUInstanceReplaceDisks, inst: Instance, indexes: list[int], running: bool) -> None:
    """Refuse a running instance, and one whose secondary copies are behind."""
    if running:
        raise errors.OpPrereqError(
            f"Instance {inst.name} is running: replacing the primary node's copies of a"
            " running mirrored instance is not supported yet; stop it, or fail it over and"
            " replace them on its secondary (-s)",
            C.ECODE_STATE,
        )
    secondary = inst.secondary_nodes[0]
    if any(secondary in inst.disks[idx].outdated for idx in indexes):
        raise errors.OpPrereqError(
            f"Node {lu.cfg.lookup(Node, secondary).name} has degraded storage, unsafe to"
            f" replace disks for instance {inst.name}",
            C.ECODE_STATE,
        )


async def replace(lu: LUInstanceReplaceDisks, indexes: list[int]) -> None:
    """The primary's copies of disks ``indexes`` made anew from the secondary's."""
    primary, secondary = lu.pnode, lu.old_secondary
    inst = lu.updated()
    for idx in indexes:
        disk = inst.disks[idx]
        if primary.uuid not in disk.outdated:
            disk.outdated = [*disk.outdated, primary.uuid]
            disk.generation += 1
    lu.tx.update(inst)
    await lu.checkpoint()  # outdated before the old copies go
    for idx in indexes:
        wire = U.disk_wire(lu.cfg, inst.disks[idx])
        lu.log_info(f"Removing the old copy of disk/{idx} on {primary.name}")
        await lu.master.rpc.run(
            primary, blockdev_remove(wire), f"Can't remove the old copy of disk/{idx}"
        )
        lu.log_info(f"Adding storage on {primary.name} for disk/{idx}")
        await lu.master.rpc.run(
            primary, blockdev_create(wire), f"Can't create block device on {primary.name}"
        )
    # The secondary's copies are read whole: their exports (active disks) end meanwhile.
    if not await instance_disks.shutdown_disks(lu, inst):
        raise errors.OpExecError(f"Can't shut down the disks of instance {inst.name}")
    lu.log_info(f"Copying the secondary's copies from {secondary.name}")
    for idx in indexes:
        await _fill(lu, inst, idx, primary, secondary)
        inst.disks[idx].outdated = [n for n in inst.disks[idx].outdated if n != primary.uuid]
        inst.disks[idx].generation += 1
    lu.tx.update(inst)
    if inst.disks_active:
        await instance_disks.link_copies(lu, inst)
    lu.feedback(f"* Instance {inst.name}'s disks are in sync")


async def _fill(lu: LUInstanceReplaceDisks, inst: Instance, idx: int, to: Node, src: Node) -> None:
    """Disk ``idx``'s copy on ``to`` filled whole from ``src``'s: the roles
    swapped for the copy (``to`` exports, ``src`` copies into the export)."""
    wire = _swapped(lu, inst.disks[idx], src)
    what = f"Could not copy disk/{idx} of {inst.name} to node {to.name}"
    await lu.master.rpc.run(to, blockdev_assemble(wire), what)
    try:
        copying = asyncio.create_task(lu.master.rpc.run(src, mirror_copy(inst.name, wire), what))
        try:
            await mirror_sync.report(lu, src, inst, inst.disks[idx].iv_name, wire["uuid"], copying)
        finally:
            if not copying.done():
                copying.cancel()
        await copying
    finally:
        result = await lu.master.rpc.result(to, blockdev_shutdown(wire))
        result.report(lu.warn, f"Could not end the export of disk/{idx} on node {to.name}")


def _swapped(lu: LUInstanceReplaceDisks, disk: Disk, first: Node) -> DiskWire:
    """``disk`` with ``first`` as its primary node (its description's nodes,
    logical_id and addresses)."""
    swapped = copy.deepcopy(disk)
    swapped.nodes = [first.uuid, *(n for n in disk.nodes if n != first.uuid)]
    templates.DISK_TEMPLATES[disk.dev_type].nodes_changed(swapped)
    return U.disk_wire(lu.cfg, swapped)
