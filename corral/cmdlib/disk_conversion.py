"""Converting an instance's disks to another template (``gnt-instance modify
-t``), as Ganeti 3.0.2's generic conversion: new empty disks of the new
template on the primary node, each old disk's data copied into its new one,
the instance switched to them (committed), then the old disks removed.

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
from corral.cmdlib import instance_utils as U
from corral.cmdlib.ipolicy_checks import node_group_policy
from corral.objects import ADMIN_DOWN, Disk, Instance, Node
from corral.paramtypes import format_unit
from corral.rpc.calls_storage import blockdev_convert, blockdev_create, blockdev_remove
from corral.storage import templates

if TYPE_CHECKING:
    from corral.cmdlib.instance_set_params import LUInstanceSetParams

# mirrored: conversions to and from it (a second copy made or dropped) are not built yet.
NOT_CONVERTIBLE_FROM = frozenset({N.DT_DISKLESS, N.DT_MIRRORED})
NOT_CONVERTIBLE_TO = frozenset({N.DT_DISKLESS, N.DT_BLOCK, N.DT_MIRRORED})


def check_arguments(lu: LUInstanceSetParams) -> None:
    """Ganeti's argument rules of a conversion."""
    if lu.op.disks:
        raise errors.OpPrereqError(
            "Disk template conversion and other disk changes not supported at the same time",
            C.ECODE_INVAL,
        )


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
    _, policy = node_group_policy(lu.cfg, inst.primary_node)
    allowed = policy["disk-templates"]
    if target not in map(N.canonical_template, allowed):
        raise errors.OpPrereqError(
            f"Disk template '{target}' in not allowed (allowed templates: {', '.join(allowed)})",
            C.ECODE_STATE,
        )
    where = templates.Placement(inst.name, inst.primary_node, cluster)
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
    size = sum(d.size for d in lu.converted if inst.primary_node in d.nodes)
    await U.check_node_resources(
        lu, lu.pnode, inst.hypervisor, 0, size, "the converted disks", target
    )


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
            await lu.master.rpc.run(
                node,
                blockdev_create(disk.description().to_wire()),
                f"Could not create a disk for instance {new.name} on node {node.name}",
            )
            created.append(disk)
        lu.feedback(f"Populating the new empty disks of type '{target}'...")
        for idx, (old, disk) in enumerate(zip(new.disks, lu.converted, strict=True)):
            lu.feedback(
                f" - copying data from disk {idx} ({old.dev_type}), size {format_unit(disk.size)}"
            )
            await lu.master.rpc.run(
                node,
                blockdev_convert(old.description().to_wire(), disk.description().to_wire()),
                "Error while converting the instance's template",
            )
    except BaseException:
        await asyncio.shield(_remove(lu, node, created, target))
        raise
    old_disks = new.disks
    lu.feedback(
        f"Detaching old disks ({old_template}) from the instance and removing them from"
        " cluster config"
    )
    lu.feedback(f"Adding new disks ({target}) to cluster config and attaching them to the instance")
    new.disks = lu.converted
    new.disk_template = target
    lu.tx.update(new)
    await lu.checkpoint()
    lu.feedback(f"Removing old block devices of type '{old_template}'...")
    await _remove(lu, node, old_disks, old_template)


async def _remove(lu: LUInstanceSetParams, node: Node, disks: list[Disk], kind: str) -> None:
    for disk in disks:
        await lu.master.rpc.attempt(
            node,
            blockdev_remove(disk.description().to_wire()),
            lu.warn,
            f"Could not remove the {kind} disk {disk.iv_name} on node {node.name}",
        )
