"""``gnt-cluster verify-disks`` and ``repair-disk-sizes`` (Ganeti 3.0.2's
LUClusterVerifyDisks and LUClusterRepairDiskSizes)."""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral.cmdlib.base import ALL_SET, LogicalUnit
from corral.objects import Instance, Node, NodeGroup
from corral.opcodes import cluster as opc
from corral.opcodes import group as opg
from corral.opcodes.base import OpCode
from corral.rpc.calls_storage import blockdev_getdimensions

MIB_SHIFT = 20


class LUClusterVerifyDisks(LogicalUnit[opc.OpClusterVerifyDisks]):
    """Submits one OP_GROUP_VERIFY_DISKS job per node group (or for the one named)."""

    OPCODE = opc.OpClusterVerifyDisks
    REQ_BGL = False

    def expand_names(self) -> None:
        self.groups: list[str] | str = ALL_SET
        if self.op.group_name:
            self.groups = [self.expand(NodeGroup, self.op.group_name).uuid]

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_NODEGROUP] = self.groups
        self.share_locks[C.LEVEL_NODEGROUP] = True

    async def exec(self) -> Any:
        groups = self.cfg.groups()
        if isinstance(self.groups, list):
            groups = [g for g in groups if g.uuid in self.groups]
        jobs: list[list[OpCode]] = [
            [opg.OpGroupVerifyDisks(group_name=g.name, priority=self.op.priority)] for g in groups
        ]
        return {"jobs": await self.ctx.submit_jobs(jobs)}


class LUClusterRepairDiskSizes(LogicalUnit[opc.OpClusterRepairDiskSizes]):
    """Records each disk's size as its primary node measures it, where the
    configuration says otherwise; returns ``[instance, index, "size", MiB]`` per
    change.  A node that cannot measure its disks is skipped with a warning."""

    OPCODE = opc.OpClusterRepairDiskSizes
    REQ_BGL = False

    def expand_names(self) -> None:
        self.wanted: list[str] | str = ALL_SET
        if self.op.instances:
            self.wanted = [self.expand(Instance, name).name for name in self.op.instances]

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_INSTANCE] = self.wanted
        self.needed_locks[C.LEVEL_NODE_RES] = ALL_SET
        self.share_locks[C.LEVEL_NODE_RES] = True

    def declare_level(self, level: str) -> None:
        # Named instances: their primary nodes only, read under the instances' locks.
        if level == C.LEVEL_NODE_RES and isinstance(self.wanted, list):
            self.needed_locks[level] = list(
                dict.fromkeys(i.primary_node for i in self._instances())
            )

    def _instances(self) -> list[Instance]:
        instances = self.cfg.instances()
        if isinstance(self.wanted, list):
            instances = [i for i in instances if i.name in self.wanted]
        return instances

    async def exec(self) -> Any:
        by_node: dict[str, list[Instance]] = {}
        for inst in self._instances():
            if inst.disks:
                by_node.setdefault(inst.primary_node, []).append(inst)
        changed: list[list[Any]] = []
        for node_uuid, instances in by_node.items():
            node = self.cfg.lookup(Node, node_uuid)
            disks = [d.description().to_wire() for i in instances for d in i.disks]
            result = await self.master.rpc.results([node], blockdev_getdimensions(disks))
            sizes = result[node.uuid].value
            if result[node.uuid].fail_msg or sizes is None or len(sizes) != len(disks):
                self.warn(f"Failure in blockdev_getdimensions call to node {node.name}, ignoring")
                continue
            measured = iter(size >> MIB_SHIFT for size, _ in sizes)
            for inst in instances:
                changed += self._repair(inst, [next(measured) for _ in inst.disks])
        return changed

    def _repair(self, inst: Instance, sizes: list[int]) -> list[list[Any]]:
        copy = inst.copy_for_update()
        assert isinstance(copy, Instance)
        changes = []
        for idx, (disk, size) in enumerate(zip(copy.disks, sizes, strict=True)):
            if size != disk.size:
                self.log_info(
                    f"Disk {idx} of instance {inst.name} has mismatched size,"
                    f" correcting: recorded {disk.size}, actual {size}"
                )
                disk.size = size
                changes.append([inst.name, idx, "size", size])
        if changes:
            self.tx.update(copy)
        return changes
