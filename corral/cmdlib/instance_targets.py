"""Checks of the node an instance moves to, shared by failover, migrate and
move: the target group's instance policy and the target's capabilities."""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral import capabilities, errors
from corral import constants as C
from corral import ipolicy as IP
from corral.cmdlib.ipolicy_checks import node_group_policy
from corral.objects import Node
from corral.rpc.calls_node import node_capabilities
from corral.services.params import filled_beparams
from corral.storage import templates

if TYPE_CHECKING:
    from corral.cmdlib.instance_base import InstanceLU


def check_target_ipolicy(lu: InstanceLU, target: Node, ignore_ipolicy: bool) -> None:
    """Ganeti's CheckTargetNodeIPolicy: only a move to another group is checked;
    with ``ignore_ipolicy`` a violation is a warning."""
    inst = lu.instance
    if target.group == lu.pnode.group:
        return
    _, policy = node_group_policy(lu.cfg, target.uuid)
    be = filled_beparams(lu.cfg.cluster, inst)
    ispec = {
        IP.ISPEC_MEM_SIZE: be.get("maxmem"),
        IP.ISPEC_CPU_COUNT: be.get("vcpus"),
        IP.ISPEC_DISK_COUNT: len(inst.disks),
        IP.ISPEC_DISK_SIZE: [d.size for d in inst.disks],
        IP.ISPEC_NIC_COUNT: len(inst.nics),
        IP.ISPEC_SPINDLE_USE: be.get("spindle_use"),
    }
    found = IP.instance_spec_violations(policy, ispec, [inst.disk_template] * len(inst.disks))
    if not found:
        return
    message = (
        f"Instance does not meet target node group's ({target.group}) instance policy:"
        f" {IP.comma_join(found)}"
    )
    if not ignore_ipolicy:
        raise errors.OpPrereqError(message, C.ECODE_INVAL)
    lu.warn(message)


async def check_target_capabilities(lu: InstanceLU, target: Node) -> None:
    """The target must run the instance's hypervisor and serve its disk
    template (the node's capability report)."""
    cluster = lu.cfg.cluster
    report = await lu.master.rpc.run(
        target,
        node_capabilities([unit.to_wire() for unit in templates.capacity_units(cluster)]),
        f"Cannot reach target node {target.name}",
        ecode=C.ECODE_ENVIRON,
    )
    inst = lu.instance
    for kind, doing, name in (
        (capabilities.REPORT_HYPERVISORS, "run hypervisor", inst.hypervisor),
        (capabilities.REPORT_DISK_TEMPLATES, "serve disk template", inst.disk_template),
    ):
        problem = report.get(kind, {}).get(name, "not reported")
        if problem:
            raise errors.OpPrereqError(
                f"Target node {target.name} cannot {doing} '{name}': {problem}", C.ECODE_STATE
            )
