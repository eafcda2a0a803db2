"""Moving every primary instance off a node (``gnt-node migrate`` and
``evacuate``): Ganeti's LUNodeMigrate and LUNodeEvacuate, which move
nothing themselves but submit one job per instance and answer
``{"jobs": [[true, job id], ...]}`` (Ganeti's ResultWithJobs)."""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral import errors
from corral.cmdlib.base import LogicalUnit
from corral.objects import Instance, Node
from corral.opcodes import instance as opi
from corral.opcodes import node as opn
from corral.opcodes.base import OpCode, from_dict
from corral.services import allocator
from corral.services.allocator.requests import ChangeGroup, NodeEvacuate

# Ganeti's NODE_EVAC_* modes.
EVAC_PRIMARY = "primary-only"
EVAC_SECONDARY = "secondary-only"


def primary_instances(lu: LogicalUnit[Any], node_uuid: str) -> list[Instance]:
    """The instances whose primary node is ``node_uuid``, by name."""
    return sorted(
        (i for i in lu.cfg.instances() if i.primary_node == node_uuid), key=lambda i: i.name
    )


def secondary_instances(lu: LogicalUnit[Any], node_uuid: str) -> list[Instance]:
    """The instances that have ``node_uuid`` as a secondary node, by name."""
    return sorted(
        (i for i in lu.cfg.instances() if node_uuid in i.secondary_nodes), key=lambda i: i.name
    )


class _NodeJobsLU(LogicalUnit[Any]):
    """Finds ``op.node_name``; its result is the jobs it submitted."""

    REQ_BGL = False
    node: Node

    def expand_names(self) -> None:
        self.node = self.expand(Node, self.op.node_uuid or self.op.node_name)
        self.op.node_uuid, self.op.node_name = self.node.uuid, self.node.name

    async def submit(self, jobs: list[list[OpCode]]) -> dict[str, Any]:
        return await submit_jobs(self, jobs)


async def submit_jobs(lu: LogicalUnit[Any], jobs: list[list[OpCode]]) -> dict[str, Any]:
    """Submit ``jobs`` at the unit's priority; Ganeti's ResultWithJobs."""
    for job in jobs:
        for op in job:
            op.priority = lu.op.priority
    return {"jobs": await lu.ctx.submit_jobs(jobs) if jobs else []}


class LUNodeMigrate(_NodeJobsLU):
    OPCODE = opn.OpNodeMigrate
    HPATH = "node-migrate"
    HTYPE = C.HTYPE_NODE

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_NODE] = [self.node.uuid]
        self.share_locks[C.LEVEL_NODE] = True

    def build_hooks_env(self) -> dict[str, Any]:
        return {
            "NODE_NAME": self.op.node_name,
            "ALLOW_RUNTIME_CHANGES": self.op.allow_runtime_changes,
        }

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        master = [self.master_node.uuid]
        return master, master

    async def exec(self) -> Any:
        op = self.op
        jobs: list[list[OpCode]] = [
            [
                opi.OpInstanceMigrate(
                    instance_name=inst.name,
                    mode=op.mode,
                    live=op.live,
                    iallocator=op.iallocator,
                    target_node=op.target_node,
                    allow_runtime_changes=op.allow_runtime_changes,
                    ignore_ipolicy=op.ignore_ipolicy,
                )
            ]
            for inst in primary_instances(self, self.node.uuid)
        ]
        return await self.submit(jobs)


class LUNodeEvacuate(_NodeJobsLU):
    """No hooks, as Ganeti's (a NoHooksLU)."""

    OPCODE = opn.OpNodeEvacuate

    def check_arguments(self) -> None:
        if self.op.remote_node is not None and self.op.iallocator is not None:
            raise errors.OpPrereqError("Do not specify both, iallocator and node", C.ECODE_INVAL)
        if self.op.mode not in (EVAC_PRIMARY, EVAC_SECONDARY):
            raise errors.OpPrereqError(
                "Due to an issue with the iallocator interface it is not possible to evacuate"
                " all instances at once; specify explicitly whether to evacuate primary or"
                " secondary instances",
                C.ECODE_INVAL,
            )

    def expand_names(self) -> None:
        super().expand_names()
        self.remote: Node | None = None
        if self.op.remote_node is None:
            return
        self.remote = self.expand(Node, self.op.remote_node_uuid or self.op.remote_node)
        self.op.remote_node, self.op.remote_node_uuid = self.remote.name, self.remote.uuid
        if self.remote.uuid == self.node.uuid:
            raise errors.OpPrereqError(
                "Can not use evacuated node as a new secondary node", C.ECODE_INVAL
            )
        if self.op.mode != EVAC_SECONDARY:
            raise errors.OpPrereqError(
                "Without the use of an iallocator only secondary instances can be evacuated",
                C.ECODE_INVAL,
            )

    def _instances(self) -> list[Instance]:
        if self.op.mode == EVAC_PRIMARY:
            return primary_instances(self, self.node.uuid)
        return secondary_instances(self, self.node.uuid)

    def declare_locks(self) -> None:
        self.names = [i.name for i in self._instances()]
        self.needed_locks[C.LEVEL_INSTANCE] = list(self.names)
        self.share_locks[C.LEVEL_INSTANCE] = True

    async def check_prereq(self) -> None:
        current = [i.name for i in self._instances()]
        if current != self.names:
            raise errors.OpExecError(
                f"Instances on node '{self.op.node_name}' changed since locks were acquired,"
                f" current instances are '{', '.join(current)}', used to be"
                f" '{', '.join(self.names)}'; retry the operation"
            )
        if self.names:
            self.log_info(
                f"Evacuating instances from node '{self.op.node_name}': {', '.join(self.names)}"
            )
        else:
            self.log_info(f"No instances to evacuate from node '{self.op.node_name}'")

    async def exec(self) -> Any:
        if not self.names:
            return await self.submit([])
        if self.remote is not None:
            # As Ganeti's: the secondary instances to the given new secondary,
            # a replace-disks job each.
            remote = self.remote.name
            return await self.submit(
                [
                    [
                        opi.OpInstanceReplaceDisks(
                            instance_name=name,
                            remote_node=remote,
                            disks=[],
                            mode=C.REPLACE_DISK_CHG,
                            early_release=self.op.early_release,
                        )
                    ]
                    for name in self.names
                ]
            )
        return await self.submit(await self._allocate())

    async def _allocate(self) -> list[list[OpCode]]:
        request = NodeEvacuate(list(self.names), self.op.mode)
        return await evacuation_jobs(self, request, "node evacuation", use_nodes=True)


async def evacuation_jobs(
    lu: LogicalUnit[Any], request: NodeEvacuate | ChangeGroup, what: str, use_nodes: bool
) -> list[list[OpCode]]:
    """The jobs the allocator (``lu.op.iallocator``) proposes to move
    ``request``'s instances (at least one); OpExecError if it cannot place
    them all, as Ganeti's LoadNodeEvacResult."""
    name = allocator.default_name(lu.cfg.cluster, lu.op.iallocator)
    allocator.check_exists(lu.master.paths, name)
    first = lu.cfg.lookup(Instance, request.instances[0])
    answer = await allocator.run(
        lu.master, name, request, hypervisor=first.hypervisor, disk_template=first.disk_template
    )
    if not answer.success:
        raise errors.OpPrereqError(
            f"Can't compute {what} using iallocator '{name}': {answer.info}", C.ECODE_NORES
        )
    moved, failed, jobs = answer.result
    if failed:
        reasons = ", ".join(f"{inst} ({why})" for inst, why in failed)
        lu.warn(f"Unable to evacuate instances {reasons}")
        raise errors.OpExecError(f"Unable to evacuate instances {reasons}")
    if moved:
        lu.log_info(
            "Instances to be moved: "
            + ", ".join(
                f"{inst} (to {', '.join(nodes) if use_nodes else group})"
                for inst, group, nodes in moved
            )
        )
    return [[from_dict(op) for op in job] for job in jobs]
