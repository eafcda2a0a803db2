"""``gnt-instance replace-disks`` for mirrored disks (Ganeti's
LUInstanceReplaceDisks for DRBD): a new copy on the secondary (``-s``), on a
new secondary node (``-n``, or the allocator's: ``-I``), where a copy is
outdated (``-a``), or on the primary (``-p``: :mod:`.mirror_replace_primary`).

The copy to replace is behind from the start: it is committed as outdated,
and a running guest goes on writing its primary's copy alone, before the old
copy goes.  The new copy is made, exported, and filled whole from the
primary's (under a running guest, round after round, then the guest writes
both; stopped, a plain copy); then it is current, with a new sync
generation.  A failure half-way leaves a consistent instance: its primary's
copies current, the new ones outdated (a resync or another replace-disks
finishes the work).
"""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral import errors
from corral.cmdlib import instance_placement as placement
from corral.cmdlib import instance_utils as U
from corral.cmdlib import mirror_replace_primary as replace_primary
from corral.cmdlib import mirror_sync
from corral.cmdlib.base import ALL_SET
from corral.cmdlib.instance_base import InstanceLU
from corral.cmdlib.instance_targets import check_target_ipolicy
from corral.cmdlib.mirror_failover import mirrored
from corral.objects import Instance, Node
from corral.opcodes import instance as opi
from corral.rpc.calls_mirror import mirror_degrade
from corral.rpc.calls_storage import blockdev_assemble, blockdev_create, blockdev_remove
from corral.storage import templates


class LUInstanceReplaceDisks(InstanceLU):
    OPCODE = opi.OpInstanceReplaceDisks
    HPATH = "mirrors-replace"
    NEEDS_NODE_RES = True

    new_node: Node | None = None

    def check_arguments(self) -> None:
        op = self.op
        if op.mode == C.REPLACE_DISK_CHG:
            if op.remote_node is None and op.iallocator is None:
                raise errors.OpPrereqError(
                    "When changing the secondary either an iallocator script must be used or"
                    " the new node given",
                    C.ECODE_INVAL,
                )
            if op.remote_node is not None and op.iallocator is not None:
                raise errors.OpPrereqError(
                    "Give either the iallocator or the new node, not both", C.ECODE_INVAL
                )
        elif op.remote_node is not None or op.iallocator is not None:
            raise errors.OpPrereqError(
                "The iallocator and new node options can only be used when changing the"
                " secondary node",
                C.ECODE_INVAL,
            )
        if op.disks and op.mode in (C.REPLACE_DISK_AUTO, C.REPLACE_DISK_CHG):
            raise errors.OpPrereqError("Cannot specify disks to be replaced", C.ECODE_INVAL)

    def expand_names(self) -> None:
        super().expand_names()
        if self.op.remote_node is not None:
            self.new_node = self.expand(Node, self.op.remote_node)
            self.op.remote_node, self.op.remote_node_uuid = self.new_node.name, self.new_node.uuid

    def declare_locks(self) -> None:
        super().declare_locks()
        self.share_locks[C.LEVEL_NODE] = False
        if self.op.iallocator is not None:
            # The allocator looks at every node; the others are let go once
            # it has chosen.
            self.needed_locks[C.LEVEL_NODE] = ALL_SET
            self.needed_locks[C.LEVEL_NODE_RES] = ALL_SET

    def node_locks(self) -> list[str]:
        extra = [self.new_node.uuid] if self.new_node is not None else []
        return [*super().node_locks(), *extra]

    async def check_prereq(self) -> None:
        await super().check_prereq()
        inst = self.instance
        if not inst.disks or not mirrored(inst):
            raise errors.OpPrereqError(
                "Can only run replace disks for mirrored instances", C.ECODE_INVAL
            )
        if len(inst.secondary_nodes) != 1:
            raise errors.OpPrereqError(
                "The instance has a strange layout, expected one secondary but found"
                f" {len(inst.secondary_nodes)}",
                C.ECODE_FAULT,
            )
        self.old_secondary = self.cfg.lookup(Node, inst.secondary_nodes[0])
        for index in self.op.disks:
            if index >= len(inst.disks):
                raise errors.OpPrereqError(
                    f"Invalid disk index {index} (the instance has {len(inst.disks)})",
                    C.ECODE_INVAL,
                )
        if self.op.iallocator is not None:
            self.new_node = await self._run_allocator()
            placement.release_other_nodes(
                self, inst.primary_node, self.old_secondary.uuid, self.new_node.uuid
            )
        if self.new_node is not None:
            await self._check_new_node(self.cfg.lookup(Node, self.new_node.uuid))
        self.indexes = self._indexes()
        self.running = await self.is_running() if self.indexes else False
        if self.op.mode == C.REPLACE_DISK_PRI:
            replace_primary.check(self, inst, self.indexes, self.running)

    async def _run_allocator(self) -> Node:
        """The new secondary the allocator chooses (Ganeti's words)."""
        inst = self.instance
        _, node = await placement.relocate(self, inst, [self.old_secondary.name])
        self.log_info(f"Selected new secondary for instance '{inst.name}': {node.name}")
        self.op.remote_node, self.op.remote_node_uuid = node.name, node.uuid
        return node

    async def _check_new_node(self, node: Node) -> None:
        inst = self.instance
        if node.uuid == inst.primary_node:
            raise errors.OpPrereqError(
                "The specified node is the primary node of the instance", C.ECODE_INVAL
            )
        if node.uuid == self.old_secondary.uuid:
            raise errors.OpPrereqError(
                "The specified node is already the secondary node of the instance",
                C.ECODE_INVAL,
            )
        placement.check_secondary(node, self.pnode)
        check_target_ipolicy(self, node, self.op.ignore_ipolicy)
        await U.check_node_resources(
            self, node, inst.hypervisor, 0, sum(d.size for d in inst.disks),
            f"replacing the disks of instance {inst.name}", inst.disk_template,
        )  # fmt: skip
        self.new_node = node

    def _indexes(self) -> list[int]:
        """The disks whose secondary copy is replaced."""
        inst = self.instance
        if self.op.mode != C.REPLACE_DISK_AUTO:
            return list(self.op.disks) or list(range(len(inst.disks)))
        if not inst.disks_active:
            raise errors.OpPrereqError(
                f"Please run activate-disks on instance {inst.name} first", C.ECODE_STATE
            )
        if any(inst.primary_node in disk.outdated for disk in inst.disks):
            raise errors.OpPrereqError(
                f"Instance {inst.name}'s copies on its primary node are outdated; fail it"
                " over to its secondary first",
                C.ECODE_STATE,
            )
        return [idx for idx, disk in enumerate(inst.disks) if disk.outdated]

    def build_hooks_env(self) -> dict[str, Any]:
        env = {
            "MODE": self.op.mode,
            "NEW_SECONDARY": self.op.remote_node,
            "OLD_SECONDARY": U.node_name(self.cfg, self.instance.secondary_nodes[0]),
        }
        return {**env, **super().build_hooks_env()}

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        nodes = [self.master_node.uuid, self.instance.primary_node]
        if self.op.remote_node_uuid is not None:
            nodes.append(self.op.remote_node_uuid)
        return nodes, nodes

    async def exec(self) -> Any:
        inst = self.instance
        if not self.indexes:
            self.feedback(f"No disks need replacement for instance '{inst.name}'")
            return None
        self.feedback(
            f"Replacing disk(s) {', '.join(map(str, self.indexes))} for instance '{inst.name}'"
        )
        self.feedback(f"Current primary node: {self.pnode.name}")
        self.feedback(f"Current secondary node: {self.old_secondary.name}")
        if self.op.mode == C.REPLACE_DISK_PRI:
            await replace_primary.replace(self, self.indexes)
            return None
        inst = await self._leave_behind(inst)
        old = {idx: U.disk_wire(self.cfg, inst.disks[idx]) for idx in self.indexes}
        target = self.new_node or self.old_secondary
        if self.new_node is None:
            self.log_info(f"Removing the old copies on {target.name}")
            for idx in self.indexes:
                await self._remove(target, idx, old[idx], strict=True)
        inst = await self._make_new(inst, target)
        self.log_info(f"Copying the primary's copies to {target.name}")
        await mirror_sync.resync_outdated(self, inst, self.running, full=True)
        self.tx.update(inst)
        if self.new_node is not None:
            self.log_info(f"Removing the old copies on {self.old_secondary.name}")
            for idx in self.indexes:
                await self._remove(self.old_secondary, idx, old[idx], strict=False)
        return None

    async def _leave_behind(self, inst: Instance) -> Instance:
        """The copies to replace committed as outdated; a running guest goes
        on without them (before they go)."""
        changed = self.updated()
        for idx in self.indexes:
            disk = changed.disks[idx]
            if self.old_secondary.uuid not in disk.outdated:
                disk.outdated = [*disk.outdated, self.old_secondary.uuid]
                disk.generation += 1
        self.tx.update(changed)
        await self.checkpoint()
        for idx in self.indexes:
            if self.running and self.old_secondary.uuid not in inst.disks[idx].outdated:
                await self.master.rpc.run(
                    self.pnode,
                    mirror_degrade(inst.hypervisor, inst.name, inst.disks[idx].uuid),
                    f"Could not leave the old copy of disk/{idx} of {inst.name} behind",
                )
        self.instance = changed
        return changed

    async def _make_new(self, inst: Instance, target: Node) -> Instance:
        """The new copies on ``target``, committed as outdated, exported."""
        changed = inst.copy_for_update()
        assert isinstance(changed, Instance)
        if self.new_node is not None:
            changed.secondary_nodes = [self.new_node.uuid]
            for idx in self.indexes:
                disk = changed.disks[idx]
                disk.nodes = [changed.primary_node, self.new_node.uuid]
                disk.outdated = [self.new_node.uuid]
                template = templates.DISK_TEMPLATES[disk.dev_type]
                template.nodes_changed(disk)
        for idx in self.indexes:
            self.log_info(f"Adding storage on {target.name} for disk/{idx}")
            wire = U.disk_wire(self.cfg, changed.disks[idx])
            await self.master.rpc.run(
                target, blockdev_create(wire), f"Can't create block device on {target.name}"
            )
        self.tx.update(changed)
        await self.checkpoint()
        for idx in self.indexes:
            await self.master.rpc.run(
                target,
                blockdev_assemble(U.disk_wire(self.cfg, changed.disks[idx])),
                f"Could not prepare block device disk/{idx} on node {target.name}",
            )
        self.instance = changed
        return changed

    async def _remove(self, node: Node, idx: int, wire: Any, strict: bool) -> None:
        """Disk ``idx``'s old copy on ``node`` goes (its export first)."""
        result = await self.master.rpc.result(node, blockdev_remove(wire))
        if not result.failed:
            return
        what = f"Can't remove the old copy of disk/{idx} on {node.name}"
        if strict:
            result.get(what)
        self.warn(f"{what}: {result.fail_msg}; remove it by hand")
