"""What a failover does to an instance's mirrored disks (issue 26), with
DRBD's guarantee: it never goes to a copy that is behind.

- The target must be the secondary, whose copy the configuration says is
  current: refused otherwise (Ganeti's "Disk N is degraded on target node"),
  unless ``--ignore-consistency``.
- Before the roles swap, the copies are released on both nodes (the
  secondary's export ends: its copy is about to be written by its own node).
- After, the new secondary (the old primary) exports its copy to the new
  primary.  When it cannot (its node is dead: the failover was forced past
  its shutdown), its copy is committed as outdated *before* the guest starts
  writing the new primary's copy alone; a resync brings it back
  (``gnt-instance activate-disks`` once its node answers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral import constants as C
from corral import errors
from corral.cmdlib import instance_disks
from corral.objects import Instance, Node
from corral.rpc.result import NodeCallError
from corral.storage import templates

if TYPE_CHECKING:
    from corral.cmdlib.instance_base import InstanceLU


def mirrored(inst: Instance) -> bool:
    """Whether the instance has disks on two nodes written together."""
    return any(
        (template := templates.DISK_TEMPLATES.get(disk.dev_type)) is not None
        and template.mirroring is templates.Mirroring.INTERNAL
        for disk in inst.disks
    )


def the_secondary(lu: InstanceLU, inst: Instance, given: Node | None, failover: bool) -> Node:
    """The one node a mirrored instance can move to: its secondary
    (Ganeti's words when another one, or an allocator, is asked for)."""
    (secondary,) = inst.secondary_nodes
    if lu.op.iallocator or (given is not None and given.uuid != secondary):
        text = "failed over" if failover else "migrated"
        raise errors.OpPrereqError(
            f"Instances with disk types {inst.disk_template} cannot be {text} to arbitrary"
            " nodes (neither an iallocator nor a target node can be passed)",
            C.ECODE_INVAL,
        )
    return lu.cfg.lookup(Node, secondary)


def check_current(lu: InstanceLU, inst: Instance, target: Node, ignore_consistency: bool) -> None:
    """The target's copies must be current (or the user says go on anyway)."""
    for idx, disk in enumerate(inst.disks):
        if target.uuid not in disk.outdated:
            continue
        if not ignore_consistency:
            raise errors.OpExecError(f"Disk {idx} is degraded on target node, aborting failover")
        lu.warn(
            f"Disk {idx}'s copy on {target.name} is outdated; failing over to it anyway"
            " (--ignore-consistency): the writes it missed are lost"
        )


def check_migratable(inst: Instance, target: Node) -> None:
    """A live migration goes to current copies only (Ganeti's words; no
    ``--ignore-consistency`` for a migration)."""
    for idx, disk in enumerate(inst.disks):
        if target.uuid in disk.outdated:
            raise errors.OpExecError(
                f"Disk {idx} is degraded or not fully synchronized on target node,"
                " aborting migration"
            )


def take_over(inst: Instance) -> None:
    """``inst`` (the unit's copy) just failed over: where its new primary's
    copy was outdated (``--ignore-consistency``), that copy is the one in force
    from now on, and the other copies are behind it."""
    for disk in inst.disks:
        if inst.primary_node in disk.outdated:
            disk.outdated = [uuid for uuid in disk.nodes if uuid != inst.primary_node]
            disk.generation += 1


async def release(lu: InstanceLU, inst: Instance, forced: bool) -> None:
    """The copies shut down on both nodes before the roles swap; a node that
    cannot (dead) only when the failover is ``forced`` past its source."""
    if not await instance_disks.shutdown_disks(lu, inst) and not forced:
        raise errors.OpExecError("Can't shut down the instance's disks")


async def link_or_outdate(lu: InstanceLU, inst: Instance, forced: bool) -> Instance:
    """The new secondary's copies linked to the new primary; when its node
    cannot (and the failover is ``forced``), its copies committed as
    outdated first.  The instance as it is now."""
    try:
        await instance_disks.link_copies(lu, inst)
        return inst
    except (errors.OpExecError, NodeCallError) as err:
        if not forced:
            raise
        primary = lu.cfg.lookup(Node, inst.primary_node).name
        lu.warn(f"{err}; the instance goes on with its copies on {primary} alone")
    outdated = inst.copy_for_update()
    assert isinstance(outdated, Instance)
    for disk in outdated.disks:
        behind = [uuid for uuid in disk.nodes[1:] if uuid not in disk.outdated]
        if behind:
            disk.outdated = [*disk.outdated, *behind]
            disk.generation += 1
    lu.tx.update(outdated)
    await lu.checkpoint()  # on disk before the guest writes one copy alone
    return outdated
