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

from typing import Any

from corral import errors
from corral.cmdlib.instance_base import InstanceLU
from corral.objects import Instance, Node
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
        self.created: list[dict[str, Any]] = []

    async def _call(self, node: Node, name: str, disk: dict[str, Any]) -> Any:
        return await self.lu.master.rpc.call_one(node.uuid, node.primary_ip, name, [disk])

    async def create(self) -> None:
        """Create every disk on the target; OpExecError (and none left) if one fails."""
        for index, disk in enumerate(self.disks):
            self.lu.feedback(f"* creating disk/{index} on target node {self.target.name}")
            res = await self._call(self.target, "blockdev_create", disk)
            if res.failed:
                await self.remove_target()
                raise errors.OpExecError(
                    f"Could not create disk/{index} on node {self.target.name}: {res.fail_msg}"
                )
            self.created.append(disk)

    async def remove_target(self) -> None:
        """Remove the copies made on the target (a failed migration)."""
        while self.created:
            disk = self.created.pop()
            res = await self._call(self.target, "blockdev_remove", disk)
            if res.failed:
                self.lu.warn(
                    f"Could not remove a disk copy on node {self.target.name}: {res.fail_msg}"
                )

    async def remove_source(self) -> bool:
        """Remove the source's disks (the target runs the instance on its
        copies); whether all went."""
        self.created = []
        self.lu.feedback(f"* removing the disks on the source node {self.source.name}")
        removed = True
        for index, disk in enumerate(self.disks):
            res = await self._call(self.source, "blockdev_remove", disk)
            if res.failed:
                removed = False
                self.lu.warn(
                    f"Could not remove disk/{index} on node {self.source.name}: {res.fail_msg}"
                )
        return removed
