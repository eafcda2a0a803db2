"""Runs one opcode through its logical unit's life cycle, under locks."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors
from corral.cmdlib.base import ALL_SET, LogicalUnit
from corral.cmdlib.units import unit_for
from corral.locking import LOCKSET
from corral.services.context import Master

if TYPE_CHECKING:
    from corral.jobs.runner import OpContext
    from corral.opcodes.base import OpCode

log = logging.getLogger(__name__)


class Processor:
    """The opcode executor the job queue calls."""

    def __init__(self) -> None:
        self._master: Master | None = None

    def bind(self, master: Master) -> None:
        """Attach masterd's parts (built after the queue that calls us)."""
        self._master = master

    @property
    def master(self) -> Master:
        if self._master is None:
            raise errors.ProgrammerError("Processor used before bind()")
        return self._master

    async def __call__(self, op: OpCode, ctx: OpContext) -> Any:
        cls = await unit_for(op.OP_ID)
        if cls is None:
            raise errors.OpCodeUnknown(f"Opcode {op.OP_ID} is not implemented")
        while True:
            lu = cls(self.master, op, ctx, self.master.cfg.transaction())
            try:
                result, committed = await self._process(lu, ctx)
            except errors.OpPrereqError as err:
                # As Ganeti's mcpu: a temporary lack of resources (a unit that
                # took only the locks it could get) is tried again, with more.
                if err.ecode != C.ECODE_TEMP_NORES or not lu.prepare_retry():
                    raise
                ctx.notify_retry()
                continue
            await self._settle(committed, ctx)
            return result

    async def _settle(self, committed: bool, ctx: OpContext) -> None:
        """As Ganeti's: the opcode ends with the master's ssconf files and,
        if it changed the configuration, ``config.data`` written (Ganeti's QA
        reads the file between two commands).  Its locks are free meanwhile,
        and a job's last opcode gives up its running slot: opcodes that end
        together share a write."""
        ctx.release_slot()
        serial = self.master.cfg.serial
        ssconf = self.master.ssconf
        if ssconf is not None:
            await ssconf.current(serial)
        export = self.master.config_export
        if committed and export is not None:
            await export.written(serial)
            await export.distributed()

    async def _process(self, lu: LogicalUnit[Any], ctx: OpContext) -> tuple[Any, bool]:
        """One run of the unit's life cycle, its locks released at the end."""
        lu.check_arguments()
        lu.expand_names()
        await lu.before_locks()
        lu.declare_locks()
        owner = str(ctx.job_id)
        try:
            await self._acquire_locks(lu, owner, ctx)
            await ctx.notify_start()
            return await self._run(lu)
        finally:
            # Committed or not, the unit's instances no longer need reserving.
            self.master.cfg.reservations.release(owner)
            self.master.locks.release(owner)

    async def _acquire_locks(self, lu: LogicalUnit[Any], owner: str, ctx: OpContext) -> None:
        locks = self.master.locks
        await locks.acquire(
            owner, C.LEVEL_CLUSTER, [C.BGL], shared=lu.bgl_shared(), priority=ctx.priority
        )
        for level in C.LOCK_LEVELS[1:]:
            lu.declare_level(level)
            wanted = lu.needed_locks.get(level)
            if wanted is None:
                continue
            if isinstance(wanted, str) and wanted != ALL_SET:
                raise errors.ProgrammerError(f"Locks of level {level} left undeclared: {wanted}")
            shared = lu.share_locks.get(level, False)
            if level in lu.opportunistic_levels:
                # Not the lockset's lock: a node added meanwhile is not waited for.
                names = self._all_names(level)[1:] if wanted == ALL_SET else list(wanted)
                await locks.acquire_available(owner, level, names, shared=shared)
            else:
                names = self._all_names(level) if wanted == ALL_SET else list(wanted)
                await locks.acquire(owner, level, names, shared=shared, priority=ctx.priority)
            # Before the next level is declared from them: the objects named
            # must still be the ones whose locks are now held.
            lu.recheck_expanded()
        lu.recheck_expanded()

    def _all_names(self, level: str) -> list[str]:
        cfg = self.master.cfg
        if level in (C.LEVEL_NODE, C.LEVEL_NODE_RES):
            names = [n.uuid for n in cfg.nodes()]
        elif level == C.LEVEL_NODEGROUP:
            names = [g.uuid for g in cfg.groups()]
        elif level == C.LEVEL_INSTANCE:
            names = [i.name for i in cfg.instances()]  # instances are locked by name
        elif level == C.LEVEL_NETWORK:
            names = [n.uuid for n in cfg.networks()]
        else:
            names = []
        return [LOCKSET, *names]

    async def _run(self, lu: LogicalUnit[Any]) -> tuple[Any, bool]:
        """The unit's result, and whether it changed the configuration."""
        await lu.check_prereq()
        hooks = lu.hooks()
        await hooks.run_pre()
        if lu.op.dry_run:
            return None, False
        try:
            result = await lu.exec()
            changed = await lu.tx.commit()
        finally:
            lu.tx.abandon()
            # What the unit's end dropped from the durable state (its intent
            # records) is gone from disk too before the job is reported done.
            await self.master.durable.flush()
        if not lu.POST_HOOKS_IN_EXEC:
            result = await hooks.run_post(result)
        committed = bool(changed or lu.checkpoint_changed)
        if committed:
            await hooks.run_config_update()
        return result, committed
