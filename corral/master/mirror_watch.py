"""Deciding the faults of mirrored disks: a copy that missed writes is
recorded as such before any write goes on without it (DRBD's "outdated").

When a mirrored disk's secondary fails a write, the guest pauses on its
primary node and the node keeps the fault (:mod:`corral.node.hypervisor.kvm.
guest_mirrors`).  The master asks each node that is the primary of a running
mirrored instance for its faults (``mirror_faults``, which waits for one),
commits the secondary's copy as outdated with a new sync generation, and
only then tells the node to have the guest go on alone (``mirror_degrade``).
The commit is guarded by the mastership (a deposed master's is refused), so
no copy is ever taken for current once the primary wrote without it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from corral import errors
from corral.objects import ADMIN_UP, Instance, Node
from corral.rpc.calls_mirror import FAULTS_WAIT_MAX, mirror_degrade, mirror_faults
from corral.rpc.wire import MirrorFaultWire
from corral.storage import templates

if TYPE_CHECKING:
    from corral.config.manager import ConfigManager
    from corral.services.context import Master

log = logging.getLogger(__name__)

# Seconds before a node that could not be asked is asked again.
RETRY_AFTER = 2.0


def watched_nodes(cfg: ConfigManager) -> set[str]:
    """The primary nodes of the instances that should run with mirrored disks."""
    mirrored = {
        name
        for name, template in templates.DISK_TEMPLATES.items()
        if template.mirroring is templates.Mirroring.INTERNAL
    }
    return {
        inst.primary_node
        for inst in cfg.instances()
        if inst.admin_state == ADMIN_UP and inst.disk_template in mirrored
    }


class MirrorWatch:
    """One long-polling task per watched node, following the configuration."""

    def __init__(self, master: Master) -> None:
        self._master = master
        self._loop = asyncio.get_running_loop()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._due = False  # a follow() is scheduled: commits in a burst make one

    def changed(self, cfg: ConfigManager, tables: set[str]) -> None:
        """The config listener (from any thread): watch the nodes it now names."""
        if tables & {"instances", "nodes"} and not self._due:
            self._due = True
            self._loop.call_soon_threadsafe(self.follow)

    def follow(self) -> None:
        """Start and stop the nodes' tasks as the configuration says."""
        self._due = False
        wanted = watched_nodes(self._master.cfg)
        for uuid in set(self._tasks) - wanted:
            self._tasks.pop(uuid).cancel()
        for uuid in wanted - set(self._tasks):
            self._tasks[uuid] = self._loop.create_task(self._watch(uuid), name=f"mirror-{uuid}")

    async def stop(self) -> None:
        """Stop every task (the master steps down)."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _watch(self, uuid: str) -> None:
        while True:
            node = self._master.cfg.get(Node, uuid)
            if node is None:
                return
            result = await self._master.rpc.result(node, mirror_faults(FAULTS_WAIT_MAX))
            if result.failed or result.value is None:
                await asyncio.sleep(RETRY_AFTER)
                continue
            for fault in result.value:
                try:
                    await self.decide(node, fault)
                except errors.GenericError as err:
                    log.error("Mirrored disk %s of %s: %s", fault["disk"], fault["instance"], err)
                    await asyncio.sleep(RETRY_AFTER)

    async def decide(self, node: Node, fault: MirrorFaultWire) -> None:
        """Record the fault's secondary copy as outdated, then let the guest go on."""
        cfg = self._master.cfg
        inst = cfg.find(Instance, fault["instance"])
        if inst is None or inst.primary_node != node.uuid:
            log.warning("Ignoring a mirror fault of %s on %s", fault["instance"], node.name)
            return
        disk = next((d for d in inst.disks if d.uuid == fault["disk"]), None)
        if disk is None:
            return
        behind = [n for n in disk.nodes if n != node.uuid]
        if sorted(disk.outdated) != sorted(behind):
            await _outdate(cfg, inst, disk.uuid, behind)
            log.warning(
                "Instance %s: the copies of %s on %s are outdated (%s)",
                inst.name,
                disk.iv_name,
                ", ".join(_name(cfg, n) for n in behind),
                fault["reason"],
            )
        await self._master.rpc.run(
            node,
            mirror_degrade(inst.hypervisor, inst.name, disk.uuid),
            f"Could not continue instance {inst.name} without its secondary on node {node.name}",
        )


async def _outdate(cfg: ConfigManager, inst: Instance, disk_uuid: str, nodes: list[str]) -> None:
    """Commit ``nodes``' copies of the disk as outdated, a new generation."""
    tx = cfg.transaction()
    updated = inst.copy_for_update()
    assert isinstance(updated, Instance)
    for disk in updated.disks:
        if disk.uuid == disk_uuid:
            disk.outdated = sorted(nodes)
            disk.generation += 1
    tx.update(updated)
    await tx.commit()


def _name(cfg: ConfigManager, uuid: str) -> str:
    node = cfg.get(Node, uuid)
    return node.name if node is not None else uuid
