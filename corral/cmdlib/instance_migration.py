"""Failover and migration: an instance changes its primary node, its disks
staying where every node sees them (Ganeti's LUInstanceFailover,
LUInstanceMigrate and the checks of its TLMigrateInstance).

The steps themselves are in :mod:`corral.cmdlib.instance_move_steps`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from corral import constants as C
from corral import errors, hypervisors
from corral.cmdlib import instance_placement as placement
from corral.cmdlib import instance_utils as U
from corral.cmdlib import intents, mirror_failover
from corral.cmdlib.base import ALL_SET
from corral.cmdlib.instance_base import INSTANCE_NODES, InstanceLU
from corral.cmdlib.instance_move_steps import Mover
from corral.cmdlib.instance_targets import check_target_capabilities, check_target_ipolicy
from corral.objects import ADMIN_UP, Instance, Node
from corral.opcodes import instance as opi
from corral.rpc.calls_migration import instance_migratable
from corral.services.params import filled_beparams, filled_hvparams
from corral.storage import templates


def check_movable(inst: Instance, failover: bool) -> None:
    """Refuse an instance whose disk template keeps its disks on one node
    (but a live migration by a hypervisor that copies them, Corral's
    extension): the one place that asks the template how it moves."""
    template = templates.DISK_TEMPLATES.get(inst.disk_template)
    kind = hypervisors.kind(inst.hypervisor)
    copies = kind is not None and kind.copies_disks
    if template is None or not template.moves.allows(failover=failover, hypervisor_copies=copies):
        text = "failovers" if failover else "migrations"
        raise errors.OpPrereqError(
            f"Instance's disk layout '{inst.disk_template}' does not allow {text}",
            C.ECODE_STATE,
        )


def check_target_node(node: Node, cleanup: bool) -> None:
    """The target must be online, vm_capable and (unless cleaning up) not drained."""
    if node.offline:
        raise errors.OpPrereqError(f"Can't use offline node: {node.name}", C.ECODE_STATE)
    if not node.vm_capable:
        raise errors.OpPrereqError(f"Can't use non-vm_capable node {node.name}", C.ECODE_STATE)
    if node.drained and not cleanup:
        raise errors.OpPrereqError(f"Can't use drained node {node.name}", C.ECODE_STATE)


class _MoveLU(InstanceLU):
    """What failover and migration share: target, locks, checks, hooks nodes."""

    FAILOVER: ClassVar[bool]
    target: Node | None = None
    source_uuid: str

    def check_arguments(self) -> None:
        if self.op.target_node is not None and self.op.iallocator is not None:
            raise errors.OpPrereqError("Do not specify both, iallocator and node", C.ECODE_INVAL)

    def expand_names(self) -> None:
        super().expand_names()
        if self.op.target_node is not None:
            self.target = self.expand(Node, self.op.target_node)
            self.op.target_node, self.op.target_node_uuid = self.target.name, self.target.uuid

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_INSTANCE] = [self.instance.name]
        # Without a target the allocator (or, cleaning up, the search for
        # where the instance runs) looks at every node.
        nodes = ALL_SET if self.target is None else INSTANCE_NODES
        self.needed_locks[C.LEVEL_NODE] = nodes
        self.share_locks[C.LEVEL_NODE] = True
        self.needed_locks[C.LEVEL_NODE_RES] = nodes

    def node_locks(self) -> list[str]:
        assert self.target is not None
        return [self.current_instance().primary_node, self.target.uuid]

    async def check_prereq(self) -> None:
        await super().check_prereq()
        self.source_uuid = self.instance.primary_node
        self.failover = self.FAILOVER
        self.cleanup = bool(self.op.cleanup)
        if self.cleanup and self.failover:
            raise errors.OpPrereqError(
                "Only a migration can be cleaned up; use 'gnt-instance migrate --cleanup'",
                C.ECODE_INVAL,
            )
        self._maybe_fall_back()
        check_movable(self.instance, self.failover)
        if not (self.cleanup and self.target is None):
            await self._choose_target()

    def _maybe_fall_back(self) -> None:
        if (
            not self.cleanup
            and not self.failover
            and self.instance.admin_state != ADMIN_UP
            and self.op.allow_failover
        ):
            self.log_info(
                "Instance is marked down or offline, fallback allowed, switching to failover"
            )
            self.failover = True

    async def _choose_target(self) -> None:
        if mirror_failover.mirrored(self.instance):
            self.target = mirror_failover.the_secondary(
                self, self.instance, self.target, self.failover
            )
        elif self.target is None:
            self.target = await self._run_allocator()
        else:
            self.target = self.cfg.lookup(Node, self.target.uuid)  # as it is under its lock
        if self.target.uuid == self.source_uuid:
            raise errors.OpPrereqError(
                f"Cannot migrate instance {self.instance.name} to its primary ({self.pnode.name})",
                C.ECODE_STATE,
            )
        check_target_node(self.target, self.cleanup)
        check_target_ipolicy(self, self.target, self.op.ignore_ipolicy)
        await check_target_capabilities(self, self.target)
        await self._check_memory(self.target)

    async def _run_allocator(self) -> Node:
        name, node = await placement.relocate(self, self.instance, [self.pnode.name])
        self.log_info(
            f"Selected nodes for instance {self.instance.name} via iallocator {name}: {node.name}"
        )
        return node

    async def _check_memory(self, target: Node) -> None:
        self.target_free_memory: int | None = None
        if self.cleanup or (self.failover and self.instance.admin_state != ADMIN_UP):
            self.log_info(
                "Not checking memory on the secondary node as instance will not be started"
            )
            return
        minmem = filled_beparams(self.cfg.cluster, self.instance)["minmem"]
        await U.check_node_resources(
            self, target, self.instance.hypervisor, minmem, 0,
            f"migrating instance {self.instance.name}",
        )  # fmt: skip

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        master = self.master_node.uuid
        target = [self.target.uuid] if self.target is not None else []
        nodes = list(dict.fromkeys([master, self.source_uuid, *target]))
        return nodes, nodes

    def _move_env(self) -> dict[str, Any]:
        """OLD_/NEW_PRIMARY from the instance as the config has it now: in the
        post phase both name the new primary, as Ganeti rebuilds them."""
        current = self.cfg.get(Instance, self.instance.uuid) or self.instance
        target = self.target.name if self.target is not None else ""
        old_secondary = new_secondary = ""
        if mirror_failover.mirrored(current) and current.secondary_nodes:
            # As Ganeti's: the secondary, and the primary that takes its place.
            old_secondary = U.node_name(self.cfg, current.secondary_nodes[0])
            new_secondary = U.node_name(self.cfg, current.primary_node)
        return {
            "OLD_PRIMARY": U.node_name(self.cfg, current.primary_node),
            "NEW_PRIMARY": target,
            "OLD_SECONDARY": old_secondary,
            "NEW_SECONDARY": new_secondary,
        }


class LUInstanceFailover(_MoveLU):
    OPCODE = opi.OpInstanceFailover
    HPATH = "instance-failover"
    FAILOVER = True

    def build_hooks_env(self) -> dict[str, Any]:
        env = {
            "IGNORE_CONSISTENCY": self.op.ignore_consistency,
            "SHUTDOWN_TIMEOUT": self.op.shutdown_timeout,
            "FAILOVER_CLEANUP": self.op.cleanup,
            **self._move_env(),
        }
        return {**env, **super().build_hooks_env()}

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        # As Ganeti: the source runs the post hooks only.
        nodes, post = super().build_hooks_nodes()
        return [n for n in nodes if n != self.source_uuid], post

    async def exec(self) -> Any:
        assert self.target is not None
        await intents.settle_before(self)
        mover = Mover(self, self.source_uuid, self.target)
        await mover.failover(self.op.shutdown_timeout, self.op.ignore_consistency)
        return None


class LUInstanceMigrate(_MoveLU):
    OPCODE = opi.OpInstanceMigrate
    HPATH = "instance-migrate"
    FAILOVER = False

    async def check_prereq(self) -> None:
        await super().check_prereq()
        self.live = False
        self.current_memory = 0
        await self._check_mode()
        if self.failover:
            check_movable(self.instance, True)  # fell back: the disks must be shared

    async def _check_mode(self) -> None:
        if self.failover or self.cleanup:
            return
        if filled_beparams(self.cfg.cluster, self.instance)["always_failover"]:
            self.log_info("Instance configured to always failover; fallback to failover")
            self.failover = True
            return
        if not await self._migratable():
            return
        self.live = self._mode() == C.HT_MIGRATION_LIVE
        running = await U.running_instances(self, self.pnode, [self.instance.hypervisor])
        info = running.get(self.instance.name)
        self.current_memory = info["memory"] if info is not None else 0

    async def _migratable(self) -> bool:
        """Ganeti's instance_migratable check; False: fell back to failover."""
        res = await self.master.rpc.result(self.pnode, instance_migratable(self.descriptor()))
        if res.failed and self.op.allow_failover:
            self.log_info("Can't migrate, instance offline, fallback to failover")
            self.failover = True
            return False
        res.get("Can't migrate, please use failover", C.ECODE_STATE)
        return True

    def _mode(self) -> str:
        if self.op.live is not None and self.op.mode is not None:
            raise errors.OpPrereqError(
                "Only one of the 'live' and 'mode' parameters are accepted", C.ECODE_INVAL
            )
        if self.op.live is not None:
            return C.HT_MIGRATION_LIVE if self.op.live else C.HT_MIGRATION_NONLIVE
        if self.op.mode is not None:
            return str(self.op.mode)
        hv = filled_hvparams(self.cfg.cluster, self.instance)
        return str(hv.get("migration_mode", C.HT_MIGRATION_LIVE))

    def build_hooks_env(self) -> dict[str, Any]:
        return {
            **super().build_hooks_env(),
            "MIGRATE_LIVE": self.live,
            "MIGRATE_CLEANUP": self.op.cleanup,
            **self._move_env(),
            "ALLOW_RUNTIME_CHANGES": self.op.allow_runtime_changes,
        }

    async def exec(self) -> Any:
        if self.cleanup:
            # What an interrupted migration left waits for this repair: it is
            # settled once the unit committed (its lock released).
            await Mover(self, self.source_uuid, self.target).cleanup()
            intents.resolve_in_background(self.master)
            return None
        await intents.settle_before(self)
        mover = Mover(self, self.source_uuid, self.target)
        if self.failover:
            assert self.target is not None
            await mover.failover(C.DEFAULT_SHUTDOWN_TIMEOUT, False)
        else:
            await mover.migrate(self.live, self.current_memory, self.op.allow_runtime_changes)
        return None
