"""An instance's disks as a whole: activate, deactivate and recreate them
(Ganeti 3.0.2's LUInstanceActivateDisks, LUInstanceDeactivateDisks and
LUInstanceRecreateDisks).

Activation assembles each disk on each node holding it, the primary last,
and records ``disks_active``; Corral's templates check no size when they
assemble (``ignore_size`` changes nothing) and never resync
(``wait_for_sync`` has nothing to wait for).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from corral import constants as C
from corral import errors
from corral.cmdlib import instance_placement as placement
from corral.cmdlib import instance_utils as U
from corral.cmdlib import mirror_sync
from corral.cmdlib.backup_common import check_node_online
from corral.cmdlib.base import ALL_SET, LogicalUnit
from corral.cmdlib.instance_base import InstanceLU
from corral.objects import ADMIN_DOWN, ADMIN_OFFLINE, Instance, Node
from corral.opcodes import instance as opi
from corral.rpc.calls_storage import (
    blockdev_assemble,
    blockdev_create,
    blockdev_remove,
    blockdev_shutdown,
)
from corral.rpc.declare import Request
from corral.rpc.result import RpcResult
from corral.rpc.wire import DiskWire
from corral.services.allocator.requests import InstanceAlloc
from corral.services.params import filled_beparams
from corral.storage import templates

# What recreate-disks may change of a disk (Ganeti's _MODIFYABLE).
MODIFIABLE = frozenset({"size", "mode", "spindles"})


def disk_node_order(inst: Instance) -> list[tuple[str, int]]:
    """``(node, disk index)`` of every copy of every disk, the primary's last."""
    pairs = [
        (node, idx)
        for idx, disk in enumerate(inst.disks)
        for node in disk.nodes or [inst.primary_node]
    ]
    return sorted(pairs, key=lambda pair: pair[0] == inst.primary_node)


async def _each_copy(
    lu: InstanceLU, inst: Instance, request_of: Callable[[DiskWire], Request[Any]]
) -> list[tuple[Node, int, bool, RpcResult[Any]]]:
    """``request_of(disk)`` for every copy of every disk, in
    :func:`disk_node_order`: ``(node, disk index, on the primary, result)``."""
    done = []
    for node_uuid, idx in disk_node_order(inst):
        node = lu.cfg.lookup(Node, node_uuid)
        request = request_of(U.disk_wire(lu.cfg, inst.disks[idx]))
        result = (await lu.master.rpc.results([node], request))[node.uuid]
        done.append((node, idx, node_uuid == inst.primary_node, result))
    return done


async def assemble_disks(lu: InstanceLU, inst: Instance) -> tuple[bool, list[list[Any]]]:
    """Assemble every disk (Ganeti's AssembleInstanceDisks); whether all went
    well, and ``[primary node, iv_name, path on it]`` per disk."""
    ok = True
    paths: dict[int, str | None] = {}
    for node, idx, primary, result in await _each_copy(lu, inst, blockdev_assemble):
        if result.fail_msg:
            lu.warn(
                f"Could not prepare block device {inst.disks[idx].iv_name} on node {node.name}"
                f" (is_primary={primary}): {result.fail_msg}"
            )
            # An offline secondary is no failure (Ganeti's is_offline_secondary).
            if primary or not result.offline:
                ok = False
        elif primary:
            paths[idx] = result.value
    pnode = lu.cfg.lookup(Node, inst.primary_node).name
    return ok, [[pnode, disk.iv_name, paths.get(idx)] for idx, disk in enumerate(inst.disks)]


async def shutdown_disks(lu: InstanceLU, inst: Instance) -> bool:
    """Shut every disk down on every node holding it (Ganeti's
    ShutdownInstanceDisks); whether all went well (an offline secondary does)."""
    ok = True
    for node, idx, primary, result in await _each_copy(lu, inst, blockdev_shutdown):
        if result.fail_msg:
            lu.warn(
                f"Could not shutdown block device {inst.disks[idx].iv_name} on node"
                f" {node.name}: {result.fail_msg}"
            )
            if primary or not result.offline:
                ok = False
    return ok


async def link_copies(lu: LogicalUnit[Any], inst: Instance) -> None:
    """Make every mirrored disk's secondary copies reachable from the primary
    (their node exports them): what the primary's writes need, by the guest
    or the OS scripts.  OpExecError naming the node that could not; a copy
    that is behind is not written (the primary writes its own alone until a
    resync), so its node failing is only a warning."""
    for idx, disk in enumerate(inst.disks):
        template = templates.DISK_TEMPLATES.get(disk.dev_type)
        if template is None or template.mirroring is not templates.Mirroring.INTERNAL:
            continue
        if inst.primary_node in disk.outdated:
            # Never written (or read) while it is behind: a replace-disks -p
            # left half-way, say.
            raise errors.OpExecError(
                f"Disk {idx}'s copy on the primary node"
                f" {lu.cfg.lookup(Node, inst.primary_node).name} is outdated; replace it"
                " (gnt-instance replace-disks -p) or fail over to the secondary"
            )
        wire = U.disk_wire(lu.cfg, disk)
        for uuid in disk.nodes[1:]:
            node = lu.cfg.lookup(Node, uuid)
            what = (
                f"Could not prepare block device {disk.iv_name or idx} of {inst.name}"
                f" on secondary node {node.name}"
            )
            result = await lu.master.rpc.result(node, blockdev_assemble(wire))
            if result.failed and not result.deposed and uuid in disk.outdated:
                lu.warn(f"{what} (its copy is outdated): {result.fail_msg}")
                continue
            result.get(what)


class LUInstanceActivateDisks(InstanceLU):
    """``gnt-instance activate-disks``: the disks ready for use on their nodes."""

    OPCODE = opi.OpInstanceActivateDisks

    async def check_prereq(self) -> None:
        await super().check_prereq()
        check_node_online(self.pnode)

    async def exec(self) -> Any:
        ok, info = await assemble_disks(self, self.instance)
        if not ok:
            raise errors.OpExecError("Cannot activate block devices")
        inst = self.updated()
        inst.disks_active = True
        # As Ganeti's wait for DRBD's sync: outdated mirrored copies resynced
        # (under the running guest, its QEMU holding the dirty bitmap; else
        # copied whole).
        if any(disk.outdated for disk in inst.disks):
            await mirror_sync.resync_outdated(self, inst, await self.is_running())
        self.tx.update(inst)
        return info


class LUInstanceDeactivateDisks(InstanceLU):
    """``gnt-instance deactivate-disks``: only of an instance that is down,
    unless forced."""

    OPCODE = opi.OpInstanceDeactivateDisks

    async def check_prereq(self) -> None:
        await super().check_prereq()
        if not self.op.force:
            await self.check_state((ADMIN_DOWN,), "cannot shutdown disks")

    async def exec(self) -> Any:
        await shutdown_disks(self, self.instance)
        inst = self.updated()
        inst.disks_active = False
        self.tx.update(inst)
        return None


class LUInstanceRecreateDisks(InstanceLU):
    """``gnt-instance recreate-disks``: new, empty disks where they are missing,
    optionally changed (size, mode) or on other nodes (-n, or an allocator).
    A mirrored disk is made anew on each of its nodes (all its copies
    missing: one that is left refuses, and replace-disks makes the others),
    its empty copies current."""

    OPCODE = opi.OpInstanceRecreateDisks
    HPATH = "instance-recreate-disks"

    def check_arguments(self) -> None:
        op = self.op
        indexes = [idx for idx, _ in op.disks]
        repeated = sorted({idx for idx in indexes if indexes.count(idx) > 1})
        if repeated:
            raise errors.OpPrereqError(
                f"Some disks have been specified more than once: {', '.join(map(str, repeated))}",
                C.ECODE_INVAL,
            )
        if op.iallocator and op.nodes:
            raise errors.OpPrereqError("Do not specify both, iallocator and node", C.ECODE_INVAL)
        for idx, params in op.disks:
            unsupported = sorted(set(params) - MODIFIABLE)
            if unsupported:
                raise errors.OpPrereqError(
                    f"Parameters for disk {idx} try to change unmodifyable parameter(s):"
                    f" {', '.join(unsupported)}",
                    C.ECODE_INVAL,
                )
        self.changes = {idx: _checked_changes(idx, params) for idx, params in op.disks}

    def expand_names(self) -> None:
        super().expand_names()
        self.new_nodes = [self.expand(Node, name) for name in self.op.nodes]

    def declare_locks(self) -> None:
        super().declare_locks()
        if self.new_nodes:
            self.needed_locks[C.LEVEL_NODE] = [n.uuid for n in self.new_nodes]
        elif self.op.iallocator:
            self.needed_locks[C.LEVEL_NODE] = ALL_SET
        self.share_locks[C.LEVEL_NODE] = False
        self.needed_locks[C.LEVEL_NODE_RES] = self.needed_locks[C.LEVEL_NODE]

    async def check_prereq(self) -> None:
        await super().check_prereq()
        inst = self.instance
        template = templates.check_implemented(inst.disk_template)
        if self.new_nodes and len(self.new_nodes) != len(inst.all_nodes):
            raise errors.OpPrereqError(
                f"Instance {inst.name} currently has {len(inst.all_nodes)} nodes, but"
                f" {len(self.new_nodes)} replacement nodes were specified",
                C.ECODE_INVAL,
            )
        moving = bool(self.new_nodes or self.op.iallocator)
        if not self.op.iallocator:
            check_node_online(self.new_nodes[0] if self.new_nodes else self.pnode)
        if not inst.disks:
            raise errors.OpPrereqError(f"Instance '{inst.name}' has no disks", C.ECODE_INVAL)
        if template.adopts:
            raise errors.OpPrereqError(
                f"The disks of instance '{inst.name}' are devices taken over ({template.name}):"
                " Corral cannot make them anew",
                C.ECODE_INVAL,
            )
        if not (moving and self.pnode.offline):
            await self.check_state((ADMIN_DOWN, ADMIN_OFFLINE), "cannot recreate disks")
        wanted = self.changes or {idx: {} for idx in range(len(inst.disks))}
        if max(wanted) >= len(inst.disks):
            raise errors.OpPrereqError(f"Invalid disk index '{max(wanted)}'", C.ECODE_INVAL)
        if moving and sorted(wanted) != list(range(len(inst.disks))):
            raise errors.OpPrereqError(
                "Can't recreate disks partially and change the nodes at the same time",
                C.ECODE_INVAL,
            )
        self.wanted = wanted
        if self.op.iallocator:
            self.new_nodes = await self._allocate(self.op.iallocator)

    async def _allocate(self, name: str) -> list[Node]:
        inst = self.instance
        be = filled_beparams(self.cfg.cluster, inst)
        request = InstanceAlloc(
            name=inst.name,
            memory=int(be["maxmem"]),
            vcpus=int(be["vcpus"]),
            spindle_use=int(be["spindle_use"]),
            disks=[{"size": d.size, "mode": d.mode} for d in inst.disks],
            disk_template=inst.disk_template,
            hypervisor=inst.hypervisor,
            os=inst.os,
            tags=list(inst.tags),
            nics=[{}],
            group_name=None,
            start=False,
            required_nodes=1 + templates.check_implemented(inst.disk_template).secondaries,
        )
        nodes = await placement.choose_nodes(self, name, request)
        placement.release_other_nodes(self, *(node.uuid for node in nodes))
        return nodes

    async def exec(self) -> Any:
        inst = self.updated()
        for idx, changes in self.wanted.items():
            disk = inst.disks[idx]
            disk.size = changes.get("size", disk.size)
            disk.mode = changes.get("mode", disk.mode)
        if self.new_nodes:
            self.warn(
                "Changing the instance's nodes, you will have to remove any disks left on the"
                " older nodes manually"
            )
            template = templates.check_implemented(inst.disk_template)
            primary, *secondaries = [n.uuid for n in self.new_nodes]
            inst.primary_node = primary
            inst.secondary_nodes = secondaries
            for disk in inst.disks:
                disk.nodes = template.disk_nodes(primary, secondaries)
                template.nodes_changed(disk)
        created: list[tuple[int, Node]] = []
        try:
            for idx in sorted(self.wanted):
                disk = inst.disks[idx]
                for node in (self.cfg.lookup(Node, n) for n in disk.holders(inst.primary_node)):
                    await self.master.rpc.run(
                        node,
                        blockdev_create(U.disk_wire(self.cfg, disk)),
                        f"Could not create disk {idx} of instance {inst.name} on node {node.name}",
                    )
                    created.append((idx, node))
                if disk.outdated:  # every copy new, and empty: all current
                    disk.outdated = []
                    disk.generation += 1
        except BaseException:
            # Nothing is recorded: what this run made goes, so that a retry can.
            for idx, node in created:
                what = f"Could not remove the new disk {idx} of {inst.name} on {node.name}"
                request = blockdev_remove(U.disk_wire(self.cfg, inst.disks[idx]))
                await asyncio.shield(self.master.rpc.attempt(node, request, self.warn, what))
            raise
        self.tx.update(inst)
        return None


def _checked_changes(idx: int, params: dict[str, Any]) -> dict[str, Any]:
    """A disk's new size (MiB) and mode, checked; spindles refused as Ganeti
    refuses them without exclusive storage (which Corral has not)."""
    if params.get("spindles") is not None:
        raise errors.OpPrereqError(
            "Spindles in instance disks cannot be specified when exclusive storage is not active",
            C.ECODE_INVAL,
        )
    out: dict[str, Any] = {}
    if "size" in params:
        size = params["size"]
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise errors.OpPrereqError(f"Invalid disk size for disk {idx}: {size!r}", C.ECODE_INVAL)
        out["size"] = size
    if "mode" in params:
        if params["mode"] not in ("rw", "ro"):
            raise errors.OpPrereqError(
                f"Invalid disk access mode for disk {idx}: {params['mode']!r} (rw or ro)",
                C.ECODE_INVAL,
            )
        out["mode"] = params["mode"]
    return out
