"""Disks of a live migration that only the source node has (template ``file``).

Ganeti cannot live-migrate them; Corral does (a deliberate extension): the
master creates empty disks on the target before it accepts the instance,
the hypervisor copies them while the guest runs (kvm: an NBD drive-mirror),
and once the target runs the guest the source's disks go.  A failed
migration removes the target's copies; the source's stay untouched.  What
a migration that masterd's death interrupted left goes once it is clear
which node runs the instance (:mod:`corral.cmdlib.intents`).
"""

from __future__ import annotations

from corral.cmdlib.instance_base import InstanceLU
from corral.objects import Instance, Node
from corral.rpc.calls_storage import blockdev_create, blockdev_remove
from corral.rpc.result import NodeCallError
from corral.rpc.wire import DiskWire
from corral.storage import templates


def copied_disks(inst: Instance) -> bool:
    """Whether a migration of ``inst`` copies its disks (the target has no copy)."""
    template = templates.DISK_TEMPLATES.get(inst.disk_template)
    return bool(inst.disks) and template is not None and not template.moves.migrate


class MigratedDisks:
    """The target's copies of ``lu.instance``'s disks during a migration."""

    def __init__(self, lu: InstanceLU, source: Node, target: Node) -> None:
        self.lu = lu
        self.source, self.target = source, target
        self.disks = [d.description().to_wire() for d in lu.instance.disks]
        self.created: list[DiskWire] = []

    async def create(self) -> None:
        """Create every disk on the target; OpExecError (and none left) if one fails."""
        for index, disk in enumerate(self.disks):
            self.lu.feedback(f"* creating disk/{index} on target node {self.target.name}")
            try:
                await self.lu.master.rpc.run(
                    self.target,
                    blockdev_create(disk),
                    f"Could not create disk/{index} on node {self.target.name}",
                )
            except NodeCallError:
                await self.remove_target()
                raise
            self.created.append(disk)

    async def remove_target(self) -> None:
        """Remove the copies made on the target (a failed migration)."""
        while self.created:
            disk = self.created.pop()
            what = f"Could not remove a disk copy on node {self.target.name}"
            await self.lu.master.rpc.attempt(self.target, blockdev_remove(disk), self.lu.warn, what)

    async def remove_source(self) -> bool:
        """Remove the source's disks (the target runs the instance on its
        copies); whether all went."""
        self.created = []
        self.lu.feedback(f"* removing the disks on the source node {self.source.name}")
        removed = True
        for index, disk in enumerate(self.disks):
            what = f"Could not remove disk/{index} on node {self.source.name}"
            res = await self.lu.master.rpc.attempt(
                self.source, blockdev_remove(disk), self.lu.warn, what
            )
            removed = removed and not res.failed
        return removed
