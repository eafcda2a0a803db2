"""gnt-instance move: an instance's disks copied to another node (Ganeti's
LUInstanceMove).

The instance is shut down, its disks are streamed from the source node to
the target node (:mod:`corral.cmdlib.instance_move_copy`), the configuration
names the target only once every disk arrived and was verified, then the
source's disks are removed and the instance started on the target if it is
marked up.  Any failure before that leaves the source as it was: its disks,
the configuration, and the instance running again if it was; the target's
partial disks are removed.  A record of the move (:mod:`corral.cmdlib.intents`)
does the same for a move that masterd's death interrupted: finished if the
configuration names the target, undone if not.
"""

from __future__ import annotations

import asyncio
from typing import Any

from corral import constants as C
from corral import errors
from corral.cmdlib import instance_utils as U
from corral.cmdlib import intents
from corral.cmdlib.instance_base import INSTANCE_NODES, InstanceLU
from corral.cmdlib.instance_move_copy import DiskCopy
from corral.cmdlib.instance_targets import check_target_capabilities, check_target_ipolicy
from corral.objects import ADMIN_UP, Instance, Node
from corral.opcodes import instance as opi
from corral.rpc.calls_instance import instance_shutdown, instance_start
from corral.rpc.calls_storage import blockdev_remove
from corral.rpc.result import NodeCallError
from corral.services.params import filled_beparams
from corral.storage import templates


def check_copyable(inst: Instance) -> None:
    """Ganeti's DTS_COPYABLE, from the template table: disks that live on one
    node and that Corral made (not seen by every node, not adopted)."""
    template = templates.DISK_TEMPLATES.get(inst.disk_template)
    copyable = template is not None and template.moves.copy
    for index, disk in enumerate(inst.disks):
        if not copyable or disk.dev_type != inst.disk_template:
            raise errors.OpPrereqError(
                f"Instance disk {index} has disk type {disk.dev_type} and is not suitable"
                " for copying",
                C.ECODE_STATE,
            )


def check_target(node: Node) -> None:
    """Ganeti's CheckNodeOnline, CheckNodeNotDrained and CheckNodeVmCapable."""
    if node.offline:
        raise errors.OpPrereqError(f"Can't use offline node {node.name}", C.ECODE_STATE)
    if node.drained:
        raise errors.OpPrereqError(f"Can't use drained node {node.name}", C.ECODE_STATE)
    if not node.vm_capable:
        raise errors.OpPrereqError(f"Can't use non-vm_capable node {node.name}", C.ECODE_STATE)


class LUInstanceMove(InstanceLU):
    OPCODE = opi.OpInstanceMove
    HPATH = "instance-move"

    target: Node
    source_uuid: str

    def expand_names(self) -> None:
        super().expand_names()
        self.target = self.expand(Node, self.op.target_node)
        self.op.target_node, self.op.target_node_uuid = self.target.name, self.target.uuid

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_INSTANCE] = [self.instance.name]
        self.needed_locks[C.LEVEL_NODE] = INSTANCE_NODES
        self.needed_locks[C.LEVEL_NODE_RES] = INSTANCE_NODES

    def node_locks(self) -> list[str]:
        return [self.current_instance().primary_node, self.target.uuid]

    async def check_prereq(self) -> None:
        await super().check_prereq()
        inst = self.instance
        self.source_uuid = inst.primary_node
        check_copyable(inst)
        target = self.cfg.lookup(Node, self.target.uuid)
        self.target = target
        if target.uuid == inst.primary_node:
            raise errors.OpPrereqError(
                f"Instance {inst.name} is already on the node {target.name}", C.ECODE_STATE
            )
        check_target(target)
        check_target_ipolicy(self, target, self.op.ignore_ipolicy)
        await check_target_capabilities(self, target)
        memory = 0
        if inst.admin_state == ADMIN_UP:
            memory = filled_beparams(self.cfg.cluster, inst)["maxmem"]
        else:
            self.log_info(
                "Not checking memory on the secondary node as instance will not be started"
            )
        disk_mib = sum(d.size for d in inst.disks)
        purpose = f"failing over instance {inst.name}"
        await U.check_node_resources(
            self, target, inst.hypervisor, memory, disk_mib, purpose, inst.disk_template
        )

    def build_hooks_env(self) -> dict[str, Any]:
        return {
            "TARGET_NODE": self.target.name,
            "SHUTDOWN_TIMEOUT": self.op.shutdown_timeout,
            **super().build_hooks_env(),
        }

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        nodes = list(dict.fromkeys([self.master_node.uuid, self.source_uuid, self.target.uuid]))
        return nodes, nodes

    async def exec(self) -> Any:
        await intents.settle_before(self)
        inst, source, target = self.instance, self.pnode, self.target
        was_running = await self.is_running()
        copy = DiskCopy(self, source, target, inst.disks)
        intent = intents.Intent.for_instance(
            intents.MOVE, inst, target.uuid, restart=was_running, transfer=copy.transfer_id
        )
        record = await intents.write(self.master, intent)
        try:
            self.log_info(f"Shutting down instance {inst.name} on source node {source.name}")
            await self._shutdown(source)
            await copy.run()
        except BaseException:
            # Also when the job is cancelled: the target's copies go and the
            # source runs again if it ran, to the end (as after a crash).
            await asyncio.shield(
                intents.conclude(self.master, record, intent, intents.Say.of(self))
            )
            raise
        await self._commit_move()
        removed = await self._remove_source_disks(source)
        try:
            if inst.admin_state == ADMIN_UP:
                self.log_info(f"Starting instance {inst.name} on node {target.name}")
                await self.master.rpc.run(
                    target,
                    instance_start(self.start_descriptor(), False),
                    f"Could not start instance {inst.name} on node {target.name}",
                )
        finally:
            if removed:
                intents.drop(self.master, record)
            else:
                intents.release(self.master, record)
        return None

    async def _remove_source_disks(self, source: Node) -> bool:
        """Remove the disks on the original node; whether all went."""
        self.log_info("Removing the disks on the original node")
        removed = True
        for disk in self.instance.disks:
            res = await self.master.rpc.attempt(
                source,
                blockdev_remove(disk.description().to_wire()),
                self.warn,
                f"Could not remove disk {disk.iv_name} on node {source.name}",
            )
            removed = removed and not res.failed
        return removed

    async def _shutdown(self, source: Node) -> None:
        inst = self.instance
        try:
            await self.master.rpc.run(
                source,
                instance_shutdown(inst.hypervisor, inst.name, self.op.shutdown_timeout),
                f"Could not shutdown instance {inst.name} on node {source.name}",
            )
        except NodeCallError as err:
            if not self.op.ignore_consistency:
                raise
            self.warn(
                f"Could not shutdown instance {inst.name} on node {source.name}. Proceeding"
                f" anyway. Please make sure node {source.name} is down. Error details:"
                f" {err.fail_msg}"
            )

    async def _commit_move(self) -> None:
        """Name the target as primary node, durably, before the source's disks go
        (the file disks keep their logical_id: the same path on the target)."""
        inst = self.updated()
        templates.set_primary(inst, self.target.uuid)
        self.tx.update(inst)
        await self.checkpoint()
        self.instance = inst
