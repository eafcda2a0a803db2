"""Where the logical units apply the instance policy (see ``corral.ipolicy``).

Each check takes the policy of the instance's node group (the group's own
keys over the cluster's) and refuses a violation with Ganeti's message and
``ECODE_INVAL``, unless the opcode's ``ignore_ipolicy`` is set: then the
violation is reported as a warning and the operation goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors
from corral import ipolicy as IP
from corral.objects import Instance, Node, NodeGroup
from corral.services.params import filled_beparams

if TYPE_CHECKING:
    from corral.cmdlib.base import LogicalUnit
    from corral.config.manager import ConfigManager


def node_group_policy(cfg: ConfigManager, node_uuid: str) -> tuple[NodeGroup, dict[str, Any]]:
    """The node's group and that group's effective policy."""
    group = cfg.lookup(NodeGroup, cfg.lookup(Node, node_uuid).group)
    return group, IP.group_ipolicy(cfg.cluster.ipolicy, group.ipolicy)


def _refuse_or_warn(lu: LogicalUnit[Any], message: str, ignore: bool) -> None:
    if ignore:
        lu.warn(message)
    else:
        raise errors.OpPrereqError(message, C.ECODE_INVAL)


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _ispec(beparams: dict[str, Any], disk_sizes: list[int], nics: int) -> dict[str, Any]:
    return {
        IP.ISPEC_MEM_SIZE: beparams.get("maxmem"),
        IP.ISPEC_CPU_COUNT: beparams.get("vcpus"),
        IP.ISPEC_DISK_COUNT: len(disk_sizes),
        IP.ISPEC_DISK_SIZE: disk_sizes,
        IP.ISPEC_NIC_COUNT: nics,
        IP.ISPEC_SPINDLE_USE: beparams.get("spindle_use"),
    }


def check_new_instance(lu: LogicalUnit[Any], inst: Instance, ignore: bool) -> None:
    """An instance about to be created (Ganeti's LUInstanceCreate check)."""
    group, policy = node_group_policy(lu.cfg, inst.primary_node)
    beparams = filled_beparams(lu.cfg.cluster, inst)
    ispec = _ispec(beparams, [d.size for d in inst.disks], len(inst.nics))
    found = IP.instance_spec_violations(policy, ispec, [inst.disk_template] * len(inst.disks))
    if found:
        message = (
            f"Instance allocation to group {group.uuid} ({group.name}) violates policy:"
            f" {IP.comma_join(found)}"
        )
        _refuse_or_warn(lu, message, ignore)


def check_changed_instance(
    lu: LogicalUnit[Any], old: Instance, new: Instance, added: list[int], ignore: bool
) -> None:
    """An instance as ``gnt-instance modify`` leaves it, with ``added`` the sizes
    of its new disks (Ganeti's LUInstanceSetParams check).

    As Ganeti, the disk specs are the instance's disks before the change plus
    the added ones, and both the maximum and the minimum memory are checked.
    """
    group, policy = node_group_policy(lu.cfg, new.primary_node)
    beparams = filled_beparams(lu.cfg.cluster, new)
    sizes = [d.size for d in old.disks] + added
    types = [d.dev_type for d in old.disks] + [old.disk_template] * len(added)
    found = []
    for memory in ("maxmem", "minmem"):
        ispec = _ispec({**beparams, "maxmem": beparams.get(memory)}, sizes, len(new.nics))
        found += IP.instance_spec_violations(policy, ispec, types)
    if found:
        message = (
            f"Instance allocation to group {group.uuid} ({group.name}) violates policy:"
            f" {IP.comma_join(_unique(found))}"
        )
        _refuse_or_warn(lu, message, ignore)


def check_grown_disk(
    lu: LogicalUnit[Any], inst: Instance, index: int, new_size: int, ignore: bool
) -> None:
    """Disk ``index`` of ``inst`` grown to ``new_size`` MiB (Ganeti's LUInstanceGrowDisk)."""
    _, policy = node_group_policy(lu.cfg, inst.primary_node)
    sizes = [new_size if i == index else d.size for i, d in enumerate(inst.disks)]
    found = IP.disk_sizes_violations(policy, sizes, [d.dev_type for d in inst.disks])
    if found:
        _refuse_or_warn(lu, f"Growing disk {index} violates policy: {IP.comma_join(found)}", ignore)


def _violating(cfg: ConfigManager, policy: dict[str, Any], instances: list[Instance]) -> set[str]:
    out = set()
    for inst in instances:
        beparams = filled_beparams(cfg.cluster, inst)
        disks = [(d.size, d.dev_type) for d in inst.disks]
        if IP.instance_violations(policy, beparams, disks, len(inst.nics)):
            out.add(inst.name)
    return out


def new_violations(cfg: ConfigManager, new_cluster_policy: dict[str, Any]) -> list[str]:
    """Instances that the new cluster policy refuses and the current one did not."""
    found: set[str] = set()
    instances = cfg.instances()
    for group in cfg.groups():
        members = {n.uuid for n in cfg.nodes() if n.group == group.uuid}
        in_group = [i for i in instances if members.intersection(i.all_nodes)]
        old = IP.group_ipolicy(cfg.cluster.ipolicy, group.ipolicy)
        new = IP.group_ipolicy(new_cluster_policy, group.ipolicy)
        found |= _violating(cfg, new, in_group) - _violating(cfg, old, in_group)
    return sorted(found)
