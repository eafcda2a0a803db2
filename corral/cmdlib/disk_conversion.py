"""Converting an instance's disks to another template (``gnt-instance modify
-t``), as Ganeti 3.0.2's generic conversion: new empty disks of the new
template on the primary node (and, to ``mirrored``, on the secondary given
with ``-n``), each old disk's data copied into its new one on the primary
(a new mirrored disk written through its quorum: both copies), the instance
switched to them (committed), then the old disks removed from every node
holding them.

As Ganeti: not from diskless, not to diskless or blockdev, not to the
template the instance has, only to an enabled template its group's policy
allows, and only while the instance is down.  A failure before the switch
removes the new disks and leaves the instance as it was.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from corral import constants as C
from corral import errors
from corral import storage_names as N
from corral.cmdlib import instance_disks
from corral.cmdlib import instance_placement as placement
from corral.cmdlib import instance_utils as U
from corral.cmdlib.ipolicy_checks import node_group_policy
from corral.objects import ADMIN_DOWN, Disk, Instance, Node
from corral.paramtypes import format_unit
from corral.rpc.calls_storage import blockdev_convert, blockdev_create, blockdev_remove
from corral.storage import templates

if TYPE_CHECKING:
    from corral.cmdlib.instance_set_params import LUInstanceSetParams

NOT_CONVERTIBLE_FROM = frozenset({N.DT_DISKLESS})
NOT_CONVERTIBLE_TO = frozenset({N.DT_DISKLESS, N.DT_BLOCK})


def _mirrored(name: str | None) -> bool:
    template = templates.DISK_TEMPLATES.get(name or "")
    return template is not None and template.mirroring is templates.Mirroring.INTERNAL


def check_arguments(lu: LUInstanceSetParams) -> None:
    """Ganeti's argument rules of a conversion."""
    if lu.op.disks:
        raise errors.OpPrereqError(
            "Disk template conversion and other disk changes not supported at the same time",
            C.ECODE_INVAL,
        )
    if _mirrored(lu.op.disk_template) and lu.op.remote_node is None:
        raise errors.OpPrereqError(
            "Changing the disk template to a mirrored one needs its secondary node (-n NODE):"
            " an allocator cannot choose it yet",
            C.ECODE_INVAL,
        )
    if not _mirrored(lu.op.disk_template) and lu.op.remote_node is not None:
        lu.warn(
            "Changing the disk template to a non-mirrored one, the secondary node will be ignored"
        )
        lu.op.remote_node = None


def expand_secondary(lu: LUInstanceSetParams) -> Node | None:
    """The new secondary node a conversion to a mirrored template names."""
    if lu.op.remote_node is None:
        return None
    node = lu.expand(Node, lu.op.remote_node)
    lu.op.remote_node, lu.op.remote_node_uuid = node.name, node.uuid
    return node


async def check_prereq(lu: LUInstanceSetParams) -> None:
    """Refuse what Ganeti refuses; note the new disks (``lu.converted``)."""
    inst, target = lu.instance, lu.op.disk_template
    assert target is not None
    if inst.disk_template in NOT_CONVERTIBLE_FROM:
        raise errors.OpPrereqError(
            f"Conversion from the '{inst.disk_template}' disk template is not supported",
            C.ECODE_INVAL,
        )
    if target in NOT_CONVERTIBLE_TO:
        raise errors.OpPrereqError(
            f"Conversion to the '{target}' disk template is not supported", C.ECODE_INVAL
        )
    if inst.disk_template == target:
        raise errors.OpPrereqError(f"Instance already has disk template {target}", C.ECODE_INVAL)
    cluster = lu.cfg.cluster
    if target not in cluster.enabled_disk_templates:
        raise errors.OpPrereqError(
            f"Disk template '{target}' is not enabled for this cluster (enabled templates:"
            f" {', '.join(cluster.enabled_disk_templates)})",
            C.ECODE_STATE,
        )
    template = templates.check_implemented(target)
    await lu.check_state((ADMIN_DOWN,), "cannot change disk template")
    if any(inst.primary_node in disk.outdated for disk in inst.disks):
        raise errors.OpPrereqError(
            f"Instance {inst.name}'s copies on its primary node are outdated; fail it over first",
            C.ECODE_STATE,
        )
    secondaries = await _check_secondary(lu, target)
    _, policy = node_group_policy(lu.cfg, inst.primary_node)
    allowed = policy["disk-templates"]
    if target not in map(N.canonical_template, allowed):
        raise errors.OpPrereqError(
            f"Disk template '{target}' in not allowed (allowed templates: {', '.join(allowed)})",
            C.ECODE_STATE,
        )
    where = templates.Placement(inst.name, inst.primary_node, cluster, secondaries)
    ledger = U.ledger(lu, inst.name)
    lu.converted = [
        template.new_disk(
            where,
            idx,
            {"size": d.size, "mode": d.mode, "name": d.name, "driver": lu.op.file_driver},
            ledger,
        )
        for idx, d in enumerate(inst.disks)
    ]
    for uuid in (inst.primary_node, *secondaries):
        node = lu.cfg.lookup(Node, uuid)
        size = sum(d.size for d in lu.converted if uuid in d.nodes)
        await U.check_node_resources(
            lu, node, inst.hypervisor, 0, size, "the converted disks", target
        )


async def _check_secondary(lu: LUInstanceSetParams, target: str) -> tuple[str, ...]:
    """The new secondary of a conversion to a mirrored template, checked
    (Ganeti's refusals); none for another template."""
    if not _mirrored(target):
        return ()
    assert lu.new_snode is not None
    node = lu.cfg.lookup(Node, lu.new_snode.uuid)
    if node.uuid == lu.instance.primary_node:
        raise errors.OpPrereqError(
            f"Given new secondary node {node.name} is the same as the primary node of the instance",
            C.ECODE_STATE,
        )
    placement.check_secondary(node, lu.pnode)
    return (node.uuid,)


async def convert(lu: LUInstanceSetParams, new: Instance) -> None:
    """Make and fill the new disks, switch ``new`` to them (committed), then
    remove the old ones."""
    old_template, target = new.disk_template, lu.op.disk_template
    assert target is not None
    node = lu.pnode
    lu.feedback(f"Converting disk template from '{old_template}' to '{target}'")
    lu.feedback(f"Creating new empty disks of type '{target}'...")
    created: list[Disk] = []
    try:
        for disk in lu.converted:
            created.append(disk)
            for holder in _holders(lu, disk, new.primary_node):
                await lu.master.rpc.run(
                    holder,
                    blockdev_create(U.disk_wire(lu.cfg, disk)),
                    f"Could not create a disk for instance {new.name} on node {holder.name}",
                )
        if _mirrored(target):
            switched = new.model_copy(update={"disks": lu.converted})
            await instance_disks.link_copies(lu, switched)
        lu.feedback(f"Populating the new empty disks of type '{target}'...")
        for idx, (old, disk) in enumerate(zip(new.disks, lu.converted, strict=True)):
            lu.feedback(
                f" - copying data from disk {idx} ({old.dev_type}), size {format_unit(disk.size)}"
            )
            await lu.master.rpc.run(
                node,
                blockdev_convert(U.disk_wire(lu.cfg, old), U.disk_wire(lu.cfg, disk)),
                "Error while converting the instance's template",
            )
    except BaseException:
        await asyncio.shield(_remove(lu, new.primary_node, created, target))
        raise
    old_disks = new.disks
    lu.feedback(
        f"Detaching old disks ({old_template}) from the instance and removing them from"
        " cluster config"
    )
    lu.feedback(f"Adding new disks ({target}) to cluster config and attaching them to the instance")
    new.disks = lu.converted
    new.disk_template = target
    new.secondary_nodes = [uuid for uuid in new.disks[0].nodes[1:]] if new.disks else []
    lu.tx.update(new)
    await lu.checkpoint()
    lu.feedback(f"Removing old block devices of type '{old_template}'...")
    await _remove(lu, new.primary_node, old_disks, old_template)


def _holders(lu: LUInstanceSetParams, disk: Disk, primary: str) -> list[Node]:
    return [lu.cfg.lookup(Node, uuid) for uuid in disk.holders(primary)]


async def _remove(lu: LUInstanceSetParams, primary: str, disks: list[Disk], kind: str) -> None:
    """The disks gone from every node holding them (a mirrored one's exports first)."""
    for disk in disks:
        for node in _holders(lu, disk, primary):
            await lu.master.rpc.attempt(
                node,
                blockdev_remove(U.disk_wire(lu.cfg, disk)),
                lu.warn,
                f"Could not remove the {kind} disk {disk.iv_name} on node {node.name}",
            )
