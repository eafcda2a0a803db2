"""Moving every instance of a node group to other groups (``gnt-group
evacuate``): Ganeti's LUGroupEvacuate, which moves nothing itself but asks
the allocator (``change-group``) and submits the jobs it proposes."""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral import errors
from corral.cmdlib.base import ALL_SET, LogicalUnit
from corral.cmdlib.node_moves import evacuation_jobs, submit_jobs
from corral.objects import NodeGroup
from corral.opcodes import group as opg
from corral.opcodes import instance as opi
from corral.opcodes.base import OpCode
from corral.services.allocator.requests import ChangeGroup


class LUGroupEvacuate(LogicalUnit[Any]):
    OPCODE = opg.OpGroupEvacuate
    HPATH = "group-evacuate"
    HTYPE = C.HTYPE_GROUP
    REQ_BGL = False

    def check_arguments(self) -> None:
        if self.op.early_release:
            # It releases a replace-disks' locks early; Corral has no replace-disks.
            raise errors.OpPrereqError(
                "early_release is not implemented by Corral yet (it applies to"
                " replace-disks, which Corral's disk templates do not need)",
                C.ECODE_INVAL,
            )

    def expand_names(self) -> None:
        self.group = self.expand(NodeGroup, self.op.group_name)
        self.targets = [self.expand(NodeGroup, name) for name in self.op.target_groups or []]
        if self.group.uuid in {g.uuid for g in self.targets}:
            raise errors.OpPrereqError(
                f"Group to be evacuated ({self.group.uuid}) can not be used as a target group"
                f" (targets are {', '.join(g.uuid for g in self.targets)})",
                C.ECODE_INVAL,
            )

    def _instance_names(self) -> list[str]:
        members = {n.uuid for n in self.cfg.nodes() if n.group == self.group.uuid}
        return sorted(i.name for i in self.cfg.instances() if i.primary_node in members)

    def declare_locks(self) -> None:
        # The instances are locked first, optimistically: check_prereq checks
        # them again under the group's lock (assigning nodes takes it).
        self.names = self._instance_names()
        self.needed_locks[C.LEVEL_INSTANCE] = list(self.names)
        targets = [g.uuid for g in self.targets]
        self.needed_locks[C.LEVEL_NODEGROUP] = [self.group.uuid, *targets] if targets else ALL_SET
        for level in (C.LEVEL_INSTANCE, C.LEVEL_NODEGROUP, C.LEVEL_NODE):
            self.share_locks[level] = True

    def declare_level(self, level: str) -> None:
        if level == C.LEVEL_NODE:
            groups = {self.group.uuid, *(g.uuid for g in self.targets)}
            self.needed_locks[C.LEVEL_NODE] = [
                n.uuid for n in self.cfg.nodes() if not self.targets or n.group in groups
            ]

    async def check_prereq(self) -> None:
        current = self._instance_names()
        if current != self.names:
            raise errors.OpPrereqError(
                f"Instances in node group '{self.group.name}' changed since locks were"
                f" acquired, wanted '{', '.join(current)}', have '{', '.join(self.names)}';"
                " retry the operation",
                C.ECODE_STATE,
            )
        if self.targets:
            self.target_uuids = [g.uuid for g in self.targets]
        else:
            self.target_uuids = [g.uuid for g in self.cfg.groups() if g.uuid != self.group.uuid]
            if not self.target_uuids:
                raise errors.OpPrereqError("There are no possible target groups", C.ECODE_INVAL)

    def build_hooks_env(self) -> dict[str, Any]:
        return {"GROUP_NAME": self.op.group_name, "TARGET_GROUPS": " ".join(self.target_uuids)}

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        nodes = [self.cfg.cluster.master_node]
        nodes += [n.uuid for n in self.cfg.nodes() if n.group == self.group.uuid]
        return nodes, nodes

    async def exec(self) -> Any:
        if not self.names:
            self.log_info(f"No instances to evacuate from node group {self.group.name}")
            return await submit_jobs(self, [])
        request = ChangeGroup(list(self.names), self.target_uuids)
        jobs = await evacuation_jobs(self, request, "group evacuation", use_nodes=False)
        self.log_info(
            f"Iallocator returned {len(jobs)} job(s) for evacuating node group {self.group.name}"
        )
        if self.op.force_failover:
            self.log_info("Will insist on failovers")
            jobs = [[_as_failover(op) for op in job] for job in jobs]
        if self.op.sequential:
            self.log_info("Jobs will be submitted to run sequentially")
            for job in jobs[1:]:
                for op in job:
                    op.depends = [[-1, [C.JOB_STATUS_ERROR, C.JOB_STATUS_SUCCESS]]]
        return await submit_jobs(self, jobs)


def _as_failover(op: OpCode) -> OpCode:
    """A failover in place of a migration (``--force-failover``)."""
    if not isinstance(op, opi.OpInstanceMigrate):
        return op
    return opi.OpInstanceFailover(
        instance_name=op.instance_name,
        instance_uuid=op.instance_uuid,
        target_node=op.target_node,
        target_node_uuid=op.target_node_uuid,
        ignore_ipolicy=op.ignore_ipolicy,
        cleanup=op.cleanup,
    )
