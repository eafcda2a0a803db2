"""Where a new instance goes: the given primary node, or the one an allocator
chooses (Ganeti's CheckIAllocatorOrNode and LUInstanceCreate._RunAllocator)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors
from corral import params as P
from corral.cmdlib.instance_nics import lookup_network
from corral.objects import Instance, Node, NodeGroup
from corral.services import allocator
from corral.services.allocator.requests import InstanceAlloc, Relocate
from corral.storage import templates

if TYPE_CHECKING:
    from corral.cmdlib.base import LogicalUnit
    from corral.opcodes.instance import OpInstanceCreate
    from corral.storage.templates import DiskTemplate


def check_arguments(op: OpInstanceCreate, template: DiskTemplate) -> None:
    """Refuse a node together with an allocator, and nodes the template cannot
    use: as many secondary nodes as it needs (an allocator chooses them when
    it chooses the primary)."""
    if (op.pnode or op.pnode_uuid) and op.iallocator:
        raise errors.OpPrereqError("Do not specify both, iallocator and node", C.ECODE_INVAL)
    secondary = bool(op.snode or op.snode_uuid)
    if secondary or op.pnode or op.pnode_uuid:
        template.check_secondaries(int(secondary))


def allocator_name(lu: LogicalUnit[OpInstanceCreate]) -> str | None:
    """The allocator to ask, or None when the primary node is given."""
    op = lu.op
    if op.pnode or op.pnode_uuid:
        return None
    if op.group_name:
        lu.cfg.lookup(NodeGroup, op.group_name)
    return allocator.default_name(lu.cfg.cluster, op.iallocator)


def check_opportunistic(op: OpInstanceCreate, allocator_name: str | None) -> None:
    """Ganeti's CheckOpportunisticLocking: only an allocator can make do with
    the nodes whose locks are free."""
    if op.opportunistic_locking and allocator_name is None:
        raise errors.OpPrereqError(
            "The opportunistic locking flag is only supported with an instance allocator",
            C.ECODE_INVAL,
        )


def opportunistic_whitelist(lu: LogicalUnit[OpInstanceCreate]) -> list[str] | None:
    """With opportunistic locking, the nodes the allocator may choose from:
    those whose node and node-res locks the unit got (by name); else None."""
    if not lu.op.opportunistic_locking:
        return None
    locks, owner = lu.master.locks, str(lu.ctx.job_id)
    held = locks.owned(owner, C.LEVEL_NODE) & locks.owned(owner, C.LEVEL_NODE_RES)
    return [node.name for node in lu.cfg.nodes() if node.uuid in held]


def check_primary(node: Node) -> None:
    """Ganeti's refusals of a primary node that cannot take a new instance."""
    _check_usable(node, "primary")


def check_secondary(node: Node, primary: Node) -> None:
    """Ganeti's refusals of a secondary node: another node than the primary,
    usable as one (the instance runs there after a failover)."""
    if node.uuid == primary.uuid:
        raise errors.OpPrereqError("The secondary node cannot be the primary node", C.ECODE_INVAL)
    _check_usable(node, "secondary")


def _check_usable(node: Node, role: str) -> None:
    for flag, state in ((node.offline, "offline"), (node.drained, "drained")):
        if flag:
            raise errors.OpPrereqError(
                f"Cannot use {state} {role} node '{node.name}'", C.ECODE_STATE
            )
    if not node.vm_capable:
        raise errors.OpPrereqError(
            f"Cannot use non-vm_capable {role} node '{node.name}'", C.ECODE_STATE
        )


def alloc_request(
    lu: LogicalUnit[OpInstanceCreate],
    disk_template: str,
    hypervisor: str,
    beparams: dict[str, Any],
    disks: list[dict[str, Any]],
    nics: list[dict[str, Any]],
) -> InstanceAlloc:
    """The ``allocate`` request for the instance the opcode creates."""
    op = lu.op
    be = P.fill(P.BE_DEFAULTS, lu.cfg.cluster.beparams.get("default", {}), beparams)
    return InstanceAlloc(
        name=op.instance_name,
        memory=int(be["maxmem"]),
        vcpus=int(be["vcpus"]),
        spindle_use=int(be["spindle_use"]),
        disks=[{"size": d["size"], "mode": d["mode"]} for d in disks],
        disk_template=disk_template,
        hypervisor=hypervisor,
        os=op.os_type or "",
        tags=list(op.tags),
        nics=[_alloc_nic(lu, n) for n in nics],
        group_name=op.group_name,
        node_whitelist=opportunistic_whitelist(lu),
        start=op.start,
        required_nodes=1 + templates.check_implemented(disk_template).secondaries,
    )


def _alloc_nic(lu: LogicalUnit[Any], spec: dict[str, Any]) -> dict[str, Any]:
    """A NIC as Ganeti's allocation requests have it (its network by uuid)."""
    network = lookup_network(lu.cfg, spec.get("network"))
    nic = {"mac": spec["mac"], "ip": spec["ip"], **spec["nicparams"]}
    nic["network"] = None if network is None else network.uuid
    return nic


async def choose_nodes(lu: LogicalUnit[Any], name: str, request: InstanceAlloc) -> list[Node]:
    """Run the allocator ``name``; its nodes (as many as the request needs,
    the primary first), checked, with the choice in the job log.  A failure
    among some nodes only (opportunistic locking) is temporary: the unit
    tries again with all of them."""
    answer = await allocator.run(
        lu.master, name, request, hypervisor=request.hypervisor, disk_template=request.disk_template
    )
    if not answer.success:
        ecode = C.ECODE_NORES
        if request.node_whitelist is not None:
            ecode = C.ECODE_TEMP_NORES
            lu.log_info(
                f"IAllocator '{name}' failed on opportunistically acquired nodes: {answer.info}"
            )
        raise errors.OpPrereqError(
            f"Can't compute nodes using iallocator '{name}': {answer.info}", ecode
        )
    nodes = []
    for chosen in answer.result:
        node = lu.cfg.find(Node, chosen)
        if node is None:
            raise errors.OpExecError(
                f"iallocator '{name}' chose node '{chosen}', which is not in the cluster"
            )
        nodes.append(node)
    lu.log_info(
        f"Selected nodes for instance {request.name} via iallocator {name}:"
        f" {', '.join(answer.result)}"
    )
    return nodes


async def relocate(lu: LogicalUnit[Any], inst: Instance, away_from: list[str]) -> tuple[str, Node]:
    """The node the allocator (``lu.op.iallocator``, or the cluster's
    default) chooses for ``inst`` instead of the nodes ``away_from`` (names:
    Ganeti's relocate request); the allocator's name and the node."""
    name = allocator.default_name(lu.cfg.cluster, lu.op.iallocator)
    allocator.check_exists(lu.master.paths, name)
    request = Relocate(inst.name, sum(d.size for d in inst.disks), away_from)
    answer = await allocator.run(
        lu.master, name, request, hypervisor=inst.hypervisor, disk_template=inst.disk_template
    )
    if not answer.success:
        raise errors.OpPrereqError(
            f"Can't compute nodes using iallocator '{name}': {answer.info}", C.ECODE_NORES
        )
    [chosen] = answer.result
    return name, lu.cfg.lookup(Node, chosen)


def release_other_nodes(lu: LogicalUnit[Any], *keep: str) -> None:
    """Give back the node locks taken for the allocation, but ``keep``'s."""
    locks = lu.master.locks
    owner = str(lu.ctx.job_id)
    for level in (C.LEVEL_NODE, C.LEVEL_NODE_RES):
        locks.release(owner, level, [n for n in locks.owned(owner, level) if n not in keep])
