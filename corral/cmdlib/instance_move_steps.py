"""The steps of a failover, a migration and a migration's cleanup, with
Ganeti's job-log lines (its TLMigrateInstance's execution).

The new primary node is staged in the unit's transaction, committed when
the unit ends well; a failover whose instance was already stopped on the
source commits it even when the start on the target fails (as Ganeti: the
instance belongs to the target from then on).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any, TypeVar

from corral import constants as C
from corral import errors
from corral.cmdlib import intents, mirror_failover
from corral.cmdlib.instance_base import InstanceLU
from corral.cmdlib.instance_migrate_disks import MigratedDisks, copied_disks
from corral.objects import ADMIN_UP, Instance, Node
from corral.rpc.calls_instance import (
    all_instances_info,
    hypervisor_info,
    instance_shutdown,
    instance_start,
)
from corral.rpc.calls_migration import (
    accept_instance,
    instance_finalize_migration_dst,
    instance_finalize_migration_src,
    instance_get_migration_status,
    instance_migrate,
    migration_info,
)
from corral.rpc.declare import Request
from corral.rpc.result import NodeCallError, RpcResult
from corral.rpc.wire import InstanceWire, JsonObject
from corral.storage import templates

log = logging.getLogger(__name__)

R = TypeVar("R")

# Seconds between migration status queries (Ganeti: 1 s, which made every
# migration up to 1 s longer than its transfer), and between progress lines.
_STATUS_POLL = 0.2
_PROGRESS_EVERY = 1.0


class Mover:
    """Moves ``lu.instance`` from the node ``source_uuid`` to ``target``."""

    def __init__(self, lu: InstanceLU, source_uuid: str, target: Node | None) -> None:
        self.lu = lu
        self.cfg = lu.cfg
        self.instance = lu.instance
        self.source = lu.cfg.lookup(Node, source_uuid)
        self.target = target
        self.migration_info: Any = None
        self.accepted: Any = None
        self.disks: MigratedDisks | None = None
        # A failover's record while it runs (see failover).
        self.intent: intents.Intent
        self.record: str | None = None
        self.source_removed = False  # a migration removed the source's disk copies

    # Helpers
    def feedback(self, message: str) -> None:
        self.lu.feedback(message)

    async def _call(self, node: Node, request: Request[R]) -> RpcResult[R]:
        """The outcome of ``request`` on ``node`` (one marked offline is not asked)."""
        if node.offline:
            name = request.call.name
            return RpcResult(node.uuid, name, fail_msg="Node is marked offline", offline=True)
        return await self.lu.master.rpc.result(node, request)

    async def _run(self, node: Node, request: Request[R], what: str) -> R:
        """The payload of ``request`` on ``node``; NodeCallError ("<what>: <why>")."""
        return (await self._call(node, request)).get(what)

    def _desc(self) -> InstanceWire:
        return self.lu.descriptor(self.instance)

    def _start_desc(self) -> InstanceWire:
        """The descriptor of the calls that start the guest on the target."""
        return self.lu.start_descriptor(self.instance)

    def _set_primary(self, node: Node) -> None:
        inst = self.instance.copy_for_update()
        assert isinstance(inst, Instance)
        templates.set_primary(inst, node.uuid)
        self.lu.tx.update(inst)
        self.instance = inst

    def _target(self) -> Node:
        assert self.target is not None
        return self.target

    # Failover
    async def failover(self, shutdown_timeout: int, ignore_consistency: bool) -> None:
        """Stop on the source, change the primary, start on the target if marked
        up; recorded, so that a failure or masterd's death leaves the instance
        running on one of them (:mod:`corral.cmdlib.intents`)."""
        inst, target, master = self.instance, self._target(), self.lu.master
        self.intent = intents.Intent.for_instance(
            intents.FAILOVER,
            inst,
            target.uuid,
            restart=inst.admin_state == ADMIN_UP,
            phase=intents.STOPPING,
        )
        self.record = await intents.write(master, self.intent)
        try:
            await self._failover(shutdown_timeout, ignore_consistency)
        except BaseException:
            if self.record is not None:
                say = intents.Say.of(self.lu)
                await asyncio.shield(intents.conclude(master, self.record, self.intent, say))
            raise

        def committed() -> bool:
            current = self.cfg.get(Instance, inst.uuid)
            return current is None or current.primary_node == target.uuid

        intents.drop_after_commit(self.lu, self.record, committed)

    async def _failover(self, shutdown_timeout: int, ignore_consistency: bool) -> None:
        inst, target = self.instance, self._target()
        mirrored = mirror_failover.mirrored(inst)
        forced = ignore_consistency or self.source.offline
        self.feedback(f"Failover instance {inst.name}")
        if inst.admin_state == ADMIN_UP or mirrored:
            self.feedback("* checking disk consistency between source and target")
            mirror_failover.check_current(self.lu, inst, target, ignore_consistency)
        else:
            self.feedback("* not checking disk consistency as instance is not running")
        self.feedback("* shutting down instance on source node")
        try:
            await self._run(
                self.source,
                instance_shutdown(inst.hypervisor, inst.name, shutdown_timeout),
                f"Could not shutdown instance {inst.name} on node {self.source.name}",
            )
        except NodeCallError as err:
            if not forced:
                raise
            self.lu.warn(
                f"Could not shutdown instance {inst.name} on node {self.source.name},"
                f" proceeding anyway; please make sure node {self.source.name} is down;"
                f" error details: {err.fail_msg}"
            )
        self.feedback("* deactivating the instance's disks on source node")
        if mirrored:
            await mirror_failover.release(self.lu, inst, forced)
        self._set_primary(target)
        if mirrored:
            mirror_failover.take_over(self.instance)
            self.lu.tx.update(self.instance)
        if inst.admin_state != ADMIN_UP:
            return
        self.feedback(f"* activating the instance's disks on target node {target.name}")
        if mirrored:
            self.instance = await mirror_failover.link_or_outdate(self.lu, self.instance, forced)
        self.feedback(f"* starting the instance on the target node {target.name}")
        assert self.record is not None
        self.intent = dataclasses.replace(self.intent, phase=intents.STARTING)
        await intents.write(self.lu.master, self.intent, self.record)
        try:
            await self._run(
                target,
                instance_start(self._start_desc(), False),
                f"Could not start instance {inst.name} on node {target.name}",
            )
        except NodeCallError:
            await self.lu.tx.commit()  # the instance now belongs to the target
            intents.drop(self.lu.master, self.record)
            self.record = None
            raise

    # Migration
    async def migrate(self, live: bool, current_memory: int, allow_runtime_changes: bool) -> None:
        """Ganeti's _ExecMigration.  Disks only the source has are copied too;
        recorded (:mod:`corral.cmdlib.intents`), so that the copies a failure
        or masterd's death leaves go once it is clear which node runs it."""
        if not copied_disks(self.instance):
            await self._migrate(live, current_memory, allow_runtime_changes)
            return
        master = self.lu.master
        intent = intents.Intent.for_instance(intents.MIGRATE, self.instance, self._target().uuid)
        record = await intents.write(master, intent)
        try:
            await self._migrate(live, current_memory, allow_runtime_changes)
        except BaseException:
            say = intents.Say.of(self.lu)
            await asyncio.shield(intents.conclude(master, record, intent, say))
            raise
        if self.source_removed:
            intents.drop(master, record)
        else:
            intents.release(master, record)

    async def _migrate(self, live: bool, current_memory: int, allow_runtime_changes: bool) -> None:
        inst, target = self.instance, self._target()
        self.feedback(f"Migrating instance {inst.name}")
        self.feedback("* checking disk consistency between source and target")
        mirrored = mirror_failover.mirrored(inst)
        if mirrored:
            mirror_failover.check_migratable(inst, target)
        await self._check_target_memory(current_memory, allow_runtime_changes)
        await self._fetch_migration_info()
        live = self._check_live(live)
        if copied_disks(inst):
            # Corral's extension: disks only the source has are copied too.
            self.disks = MigratedDisks(self.lu, self.source, target)
            await self.disks.create()
        self.feedback(f"* preparing {target.name} to accept the instance")
        try:
            self.accepted = await self._run(
                target,
                accept_instance(self._start_desc(), self.migration_info, target.secondary_ip),
                f"Could not pre-migrate instance {inst.name}",
            )
        except NodeCallError as err:
            log.error("Instance pre-migration failed, trying to revert: %s", err.fail_msg)
            await self._abort_after("Pre-migration failed, aborting")
            raise
        self.feedback(f"* migrating instance to {target.name}")
        try:
            await self._run(
                self.source,
                instance_migrate(
                    self.cfg.cluster.name, self._desc(), target.secondary_ip, live, self.accepted
                ),
                f"Could not migrate instance {inst.name}",
            )
        except NodeCallError:
            await self._abort_after("Migration failed, aborting")
            raise
        await self._wait_transfer()
        if mirrored:
            await self._finalize_mirrored(live)
        else:
            await self._finalize(live)
            self._set_primary(target)
        if self.disks is not None:
            # The configuration names the target before the source's disks go.
            await self.lu.checkpoint()
            self.source_removed = await self.disks.remove_source()
        self.feedback("* done")

    async def _check_target_memory(self, current: int, allow_runtime_changes: bool) -> None:
        target = self._target()
        unit = templates.default_unit(self.cfg.cluster)
        info = await self._run(
            target,
            hypervisor_info(self.instance.hypervisor, unit.to_wire()),
            f"Cannot get the resources of node {target.name}",
        )
        free = info["memory_free"]
        if current <= free:
            return
        if not allow_runtime_changes:
            raise errors.OpExecError(
                "Memory ballooning not allowed and not enough free memory to fit instance"
                f" {self.instance.name} on target node {target.name} (have {free}MB,"
                f" need {current}MB)"
            )
        raise errors.OpExecError(
            f"Not enough free memory on target node {target.name} for instance"
            f" {self.instance.name} (have {free}MB, need {current}MB); Corral cannot"
            " balloon an instance's memory: free memory on the target first"
        )

    async def _fetch_migration_info(self) -> None:
        self.migration_info = await self._run(
            self.source,
            migration_info(self._desc()),
            f"Failed fetching source migration information from {self.source.name}",
        )

    async def _abort_after(self, feedback: str) -> None:
        """Say why the migration stops and undo it (the caller raises)."""
        self.feedback(feedback)
        await self._abort()

    async def _transfer_status(self) -> JsonObject:
        """The migration's status; a failed one aborts it (OpExecError)."""
        failed = f"Could not migrate instance {self.instance.name}"
        try:
            status = await self._run(
                self.source, instance_get_migration_status(self._desc()), failed
            )
            if status.get("status") in C.HV_MIGRATION_FAILED_STATUSES:
                raise errors.OpExecError(f"{failed}: hypervisor returned failure")
        except errors.OpExecError as err:
            log.error("Instance migration failed, trying to revert: %s", err)
            await self._abort_after("Migration failed, aborting")
            raise
        return status

    async def _wait_transfer(self) -> None:
        self.feedback("* starting memory transfer")
        loop = asyncio.get_running_loop()
        reported = loop.time()
        while True:
            status = await self._transfer_status()
            if status.get("status") != C.HV_MIGRATION_ACTIVE:
                self.feedback("* memory transfer complete")
                return
            progress = _ram_progress(status)
            if progress and loop.time() - reported >= _PROGRESS_EVERY:
                reported = loop.time()
                self.feedback(f"* memory transfer progress: {progress}")
            await asyncio.sleep(_STATUS_POLL)

    def _check_live(self, live: bool) -> bool:
        """Live, unless the source's hypervisor says the instance cannot safely
        move while it runs (``not_live`` in its migration info: the reason)."""
        info = self.migration_info
        reason = info.get("not_live") if isinstance(info, dict) else None
        if live and reason:
            self.lu.warn(f"Migrating instance {self.instance.name} paused, not live: {reason}")
            return False
        return live

    async def _finalize(self, live: bool) -> None:
        """Finalize on both nodes; the primary changes only if both succeeded."""
        target = self._target()
        src, dst = await asyncio.gather(
            self._call(self.source, instance_finalize_migration_src(self._desc(), True, live)),
            self._call(
                target, instance_finalize_migration_dst(self._desc(), self.migration_info, True)
            ),
        )
        failed = [
            res.error(node.name).message
            for node, res in ((self.source, src), (target, dst))
            if res.failed
        ]
        if failed:
            raise errors.OpExecError(f"Could not finalize instance migration: {' '.join(failed)}")

    async def _finalize_mirrored(self, live: bool) -> None:
        """Mirrored disks change roles between the guests: the source's guest
        stops (its copy is current: it wrote both until the switch-over), the
        target's export ends and the source exports its copy, the target's
        guest links to it and runs.  If the source cannot export, its copies
        are committed as outdated before the guest runs without them."""
        target = self._target()
        # The target's export is idle once the transfer completed (the
        # source flushed its last writes then): it ends while the source's
        # guest stops, whose copy its node exports only after.
        await asyncio.gather(
            self._run(
                self.source,
                instance_finalize_migration_src(self._desc(), True, live),
                "Could not finalize instance migration",
            ),
            mirror_failover.release(self.lu, self.instance, forced=False),
        )
        self._set_primary(target)
        self.instance = await mirror_failover.link_or_outdate(self.lu, self.instance, True)
        await self._run(
            target,
            instance_finalize_migration_dst(self._desc(), self.migration_info, True),
            "Could not finalize instance migration",
        )

    async def _abort(self) -> tuple[RpcResult[None], RpcResult[None]]:
        """Ganeti's _AbortMigration: drop what the target received, keep the source."""
        target = self._target()
        dst = await self._call(
            target, instance_finalize_migration_dst(self._desc(), self.migration_info, False)
        )
        dst.report(log.error, f"Aborting migration failed on target node {target.name}")
        src = await self._call(
            self.source, instance_finalize_migration_src(self._desc(), False, False)
        )
        src.report(log.error, f"Aborting migration failed on source node {self.source.name}")
        if self.disks is not None:
            await self.disks.remove_target()
        return dst, src

    # Cleanup
    async def _locations(self) -> list[Node]:
        self.feedback(
            "* checking where the instance actually runs (if this hangs, the hypervisor"
            " might be in a bad state)"
        )
        nodes = [n for n in self.cfg.nodes() if not n.offline]
        results = await asyncio.gather(
            *(self._call(n, all_instances_info([self.instance.hypervisor])) for n in nodes)
        )
        found = [
            node
            for node, res in zip(nodes, results, strict=True)
            if self.instance.name in res.get(f"Can't contact node {node.name}")
        ]
        self.feedback(f"* instance running on: {','.join(n.name for n in found)}")
        return found

    async def cleanup(self) -> None:
        """Ganeti's _ExecCleanup: find where the instance runs, fix the config."""
        self.feedback(f"Migrating instance {self.instance.name}")
        found = await self._locations()
        if self.target is None:
            # No target given: the other node it runs on, if any (Ganeti asks
            # the allocator, whose pick matters only when it runs there).
            others = [n for n in found if n.uuid != self.source.uuid]
            self.target = others[0] if len(others) == 1 else None
        where = {n.uuid for n in found}
        on_source = self.source.uuid in where
        on_target = self.target is not None and self.target.uuid in where
        if on_source and on_target:
            found = await self._abort_interrupted()
            where = {n.uuid for n in found}
            on_source, on_target = self.source.uuid in where, self._target().uuid in where
        if on_source and on_target:
            raise errors.OpExecError(
                "Instance seems to be running on two nodes, or the hypervisor is confused;"
                " you will have to ensure manually that it runs only on one and restart"
                " this operation"
            )
        if not (on_source or on_target):
            on_target = self._adopt_unexpected(found)
        await self._settle(on_target)
        self.feedback("* done")

    async def _abort_interrupted(self) -> list[Node]:
        self.feedback("Trying to cleanup after failed migration")
        await self._fetch_migration_info()
        dst, src = await self._abort()
        if dst.failed or src.failed:
            raise errors.OpExecError(
                f"Instance migration cleanup failed: {dst.fail_msg or ''},{src.fail_msg or ''}"
            )
        return await self._locations()

    def _adopt_unexpected(self, found: list[Node]) -> bool:
        if len(found) != 1:
            raise errors.OpExecError(
                "Instance does not seem to be running at all; in this case it's safer to"
                " repair by running 'gnt-instance stop' to ensure disk shutdown, and then"
                " restarting it"
            )
        self.target = found[0]
        self.feedback(
            f"* instance running on unexpected node ({self.target.name}),"
            " updating as the new secondary"
        )
        return True

    async def _settle(self, on_target: bool) -> None:
        if not on_target:
            self.feedback(
                f"* instance confirmed to be running on its primary node ({self.source.name})"
            )
            return
        target = self._target()
        self.feedback(f"* instance running on secondary node ({target.name}), updating config")
        if mirror_failover.mirrored(self.instance):
            # Its copies change roles as a migration's end has them do.
            await mirror_failover.release(self.lu, self.instance, forced=False)
            self._set_primary(target)
            self.instance = await mirror_failover.link_or_outdate(self.lu, self.instance, True)
        else:
            self._set_primary(target)
        # What the target received is its running instance now.
        res = await self._call(target, instance_finalize_migration_dst(self._desc(), None, True))
        res.report(self.lu.warn, f"Could not finalize the instance on node {target.name}")


def _ram_progress(status: Any) -> str:
    """``transferred/total MiB`` of a migration status, if the hypervisor says."""
    if not isinstance(status, dict) or not status.get("total_ram"):
        return ""
    done, total = int(status.get("transferred_ram") or 0), int(status["total_ram"])
    return f"{done // 2**20}/{total // 2**20} MiB of RAM sent"
