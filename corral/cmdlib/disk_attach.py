"""Detaching a disk from its instance and attaching a detached one (Ganeti
3.0's ``DDM_DETACH`` and ``DDM_ATTACH`` of ``gnt-instance modify``).

A detached disk keeps its data on its node(s) and stays in the configuration
(:class:`~corral.objects.DetachedDisk`).  A file-based disk's path names its
instance: detached, its file moves up into the storage directory; attached,
into the new instance's directory under a new name, as Ganeti does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors
from corral.cmdlib import instance_utils as U
from corral.objects import DetachedDisk, Disk, Instance, Node
from corral.rpc.calls_storage import blockdev_rename
from corral.storage import templates
from corral.storage.strategy import Resource

if TYPE_CHECKING:
    from corral.cmdlib.instance_set_params import LUInstanceSetParams

# What a job attaching a detached disk reserves (its uuid), so that no other
# job attaches the same disk before this one commits.
RES_ATTACHING = "attaching"


@dataclass
class Move:
    """A disk whose logical_id changes (a file moved on its node)."""

    disk: Disk
    new_id: list[str]


def check_attach_params(params: dict[str, Any]) -> None:
    """An attach names its disk by name or uuid, nothing else (Ganeti's words)."""
    if len(params) != 1 or not ({"uuid", "name"} & params.keys()):
        raise errors.OpPrereqError(
            "Only one argument is permitted in attach op, either name or uuid", C.ECODE_INVAL
        )


def find_detached(lu: LUInstanceSetParams, params: dict[str, Any]) -> DetachedDisk:
    """The detached disk ``params`` names by uuid or name (Ganeti's
    GenericGetDiskInfo, then its refusal of a disk some instance has)."""
    cfg = lu.cfg
    detached = cfg.detached_disks()
    attached = [(inst, disk) for inst in cfg.instances() for disk in inst.disks]
    if "uuid" in params:
        uuid = params["uuid"]
        rows = [row for row in detached if row.uuid == uuid]
        holders = [inst for inst, disk in attached if disk.uuid == uuid]
        if not rows and not holders:
            raise errors.OpPrereqError(f"No disk was found with this UUID: {uuid}", C.ECODE_INVAL)
    else:
        name = params["name"]
        rows = [row for row in detached if row.disk.name == name]
        holders = [inst for inst, disk in attached if disk.name == name]
        if not rows and not holders:
            raise errors.OpPrereqError(f"No disk was found with this name: {name}", C.ECODE_INVAL)
        if len(rows) + len(holders) > 1:
            raise errors.OpPrereqError(
                f"There are {len(rows) + len(holders)} disks with this name: {name};"
                " give the disk's uuid instead",
                C.ECODE_NOTUNIQUE,
            )
    if holders:
        what = params.get("uuid") or params["name"]
        raise errors.OpPrereqError(
            f"Disk {what} already attached to instance {holders[0].name}", C.ECODE_STATE
        )
    return rows[0]


def check_attachable(lu: LUInstanceSetParams, inst: Instance, disk: Disk) -> None:
    """Ganeti's _CheckAttachDisk: the instance's template, on its nodes."""
    if disk.dev_type != inst.disk_template:
        # Ganeti lets a diskless instance take any disk; Corral's instances
        # keep one template, which an attach does not convert.
        raise errors.OpPrereqError(
            f"Instance has '{inst.disk_template}' template while disk has"
            f" '{disk.dev_type}' template",
            C.ECODE_INVAL,
        )
    if disk.nodes and not set(inst.all_nodes) <= set(disk.nodes):
        raise errors.OpPrereqError(
            f"Disk nodes are {_names(lu, disk.nodes)} while the instance's nodes"
            f" are {_names(lu, inst.all_nodes)}",
            C.ECODE_INVAL,
        )
    primary = disk.holders(inst.primary_node)[0]
    if primary != inst.primary_node:
        raise errors.OpPrereqError(
            f"The disks' primary node is {_names(lu, [primary])[0]} whereas the"
            f" instance's primary node is {_names(lu, [inst.primary_node])[0]}.",
            C.ECODE_INVAL,
        )


def _names(lu: LUInstanceSetParams, uuids: list[str]) -> list[str]:
    found = [lu.cfg.get(Node, uuid) for uuid in uuids]
    return [uuid if node is None else node.name for uuid, node in zip(uuids, found, strict=True)]


def attach(lu: LUInstanceSetParams, index: int, params: dict[str, Any]) -> Disk:
    """The detached disk ``params`` names, checked, reserved for this job and
    inserted as disk ``index`` of the changed instance (its move planned)."""
    new = lu.new
    check_attach_params(params)
    row = find_detached(lu, params)
    if row.uuid in {d.uuid for d in new.disks}:
        raise errors.OpPrereqError(
            f"Disk {row.uuid} already attached to instance {new.name}", C.ECODE_STATE
        )
    disk = row.disk.model_copy(deep=True)
    check_attachable(lu, new, disk)
    ledger = U.ledger(lu, new.name)
    other = ledger.take(Resource(RES_ATTACHING, disk.uuid))
    if other is not None:
        raise errors.OpPrereqError(
            f"Disk {disk.uuid} is being attached to instance {other} by another job",
            C.ECODE_STATE,
        )
    template = templates.get(disk.dev_type)
    where = templates.Placement(
        new.name, new.primary_node, lu.cfg.cluster, tuple(new.secondary_nodes)
    )
    new_id = template.attached(disk, where, index, ledger)
    if new_id is not None:
        lu.disk_moves.append(Move(disk, new_id))
    new.disks.insert(index, disk)
    lu.attached_rows.append(row)
    return disk


def detach(lu: LUInstanceSetParams, index: int) -> Disk:
    """Disk ``index`` of the changed instance, out of it (its move planned)."""
    disk = lu.new.disks.pop(index)
    new_id = templates.get(disk.dev_type).detached(disk)
    if new_id is not None:
        lu.disk_moves.append(Move(disk, new_id))
    lu.detached_disks.append(disk)
    return disk


def attach_index(identifier: int | str, count: int) -> int:
    """Where an attached disk goes: ``-1`` (last) or an index up to ``count``
    (Ganeti's GetIndexFromIdentifier)."""
    if isinstance(identifier, str):
        raise errors.OpPrereqError("Only positive integer or -1 is accepted", C.ECODE_INVAL)
    if identifier == -1:
        return count
    if identifier < 0:
        raise errors.OpPrereqError("Not accepting negative indices other than -1", C.ECODE_INVAL)
    if identifier > count:
        raise errors.OpPrereqError(
            f"Got disk index {identifier}, but there are only {count}", C.ECODE_INVAL
        )
    return identifier


async def move_files(lu: LUInstanceSetParams) -> None:
    """Move the files of detached and attached disks (one call to the primary
    node), then record their new logical_ids."""
    moves = lu.disk_moves
    if not moves:
        return
    await lu.node_call(
        blockdev_rename([(m.disk.description().to_wire(), m.new_id) for m in moves]),
        "Could not move the files of the detached or attached disks of",
    )
    for move in moves:
        move.disk.logical_id = move.new_id


def stage(lu: LUInstanceSetParams) -> None:
    """The configuration's change: detached disks become rows of their own,
    attached ones stop being."""
    for disk in lu.detached_disks:
        lu.tx.add(DetachedDisk.of(disk))
    for row in lu.attached_rows:
        lu.tx.remove(row)
