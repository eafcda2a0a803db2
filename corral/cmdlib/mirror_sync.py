"""Resyncing an instance's outdated mirrored copies (issue 26), as Ganeti's
activate-disks waits for DRBD to sync: the secondary's export assembled
(activate-disks did), the primary copies what the copy missed while the guest
runs (:mod:`corral.node.hypervisor.kvm.mirror_resync`) or, the instance
stopped, all of its copy (:mod:`corral.node.storage.mirror_copy`); the job
log shows the progress in Ganeti's words, and once the copy is current the
configuration says so, a new sync generation.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from corral.cmdlib import instance_utils as U
from corral.objects import Instance, Node
from corral.rpc.calls_mirror import mirror_copy, mirror_resync, mirror_resync_progress

if TYPE_CHECKING:
    from corral.cmdlib.instance_base import InstanceLU

# Seconds between the progress lines in the job log.
PROGRESS_EVERY = 2.0


async def resync_outdated(
    lu: InstanceLU, inst: Instance, running: bool, full: bool = False
) -> None:
    """Bring every outdated copy of the disks of ``inst`` (the unit's copy of
    the instance, to commit; ``running`` or not) up to date, copying all of
    them when ``full`` (new copies) or the guest is stopped; each disk marked
    current."""
    pnode = lu.cfg.lookup(Node, inst.primary_node)
    for disk in inst.disks:
        if not disk.outdated:
            continue
        wire = U.disk_wire(lu.cfg, disk)
        request = (
            mirror_resync(inst.hypervisor, inst.name, wire, full)
            if running
            else mirror_copy(inst.name, wire)
        )
        what = f"Could not resync disk {disk.iv_name} of {inst.name} on node {pnode.name}"
        copying = asyncio.create_task(lu.master.rpc.run(pnode, request, what))
        try:
            await report(lu, pnode, inst, disk.iv_name, disk.uuid, copying)
        finally:
            if not copying.done():
                copying.cancel()
        await copying
        disk.outdated = []
        disk.generation += 1
    lu.feedback(f"* Instance {inst.name}'s disks are in sync")


async def report(
    lu: InstanceLU,
    node: Node,
    inst: Instance,
    iv_name: str,
    disk: str,
    copying: asyncio.Task[None],
) -> None:
    """Ganeti's WaitForSync lines until the copy (by ``node``) ends."""
    started = time.monotonic()
    while not copying.done():
        await asyncio.wait({copying}, timeout=PROGRESS_EVERY)
        result = await lu.master.rpc.result(node, mirror_resync_progress(inst.name, disk))
        if result.failed or not result.value or not result.value[1]:
            continue
        done, total = result.value
        percent = 100.0 * done / total
        elapsed = time.monotonic() - started
        left = elapsed * (total - done) / done if done else None
        estimate = "no time estimate" if left is None else f"{int(left)}s remaining (estimated)"
        lu.feedback(f"- device {iv_name}: {percent:5.2f}% done, {estimate}")
