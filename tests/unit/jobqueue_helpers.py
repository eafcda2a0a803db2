"""Test helpers: a real JobQueue on a real JobStore, driven by a small test executor."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from corral import constants as C
from corral import errors
from corral.jobs.queue import JobQueue
from corral.jobs.runner import OpContext
from corral.opcodes.base import OpCode
from corral.opcodes.test import OpTestDelay, OpTestJqueue
from corral.state.sqlite.jobs import SqliteJobStore

FINAL = C.JOB_STATUS_FINALIZED


def delay(duration: float = 0.0, **params: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_TEST_DELAY", "duration": duration, **params}


def jqueue(**params: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_TEST_JQUEUE", **params}


def gated(gate: str, *, running: bool = False, **params: Any) -> dict[str, Any]:
    """An OP_TEST_JQUEUE that blocks on a named gate.

    Without ``running`` it blocks before notify_start (like an opcode waiting
    for its locks, status "waiting"); with it, after (status "running").
    """
    return jqueue(comment=("run:" if running else "wait:") + gate, **params)


class QueueHarness:
    """A JobQueue with a test executor that records what it ran."""

    def __init__(self, tmp_path: Path, max_running: int = 20) -> None:
        self.db_path = tmp_path / "queue.db"
        self.drained = False
        self.max_running = max_running
        self.store = SqliteJobStore(self.db_path)
        self.gates: dict[str, asyncio.Event] = {}
        self.started: list[int] = []
        self.running: list[int] = []  # jobs past notify_start
        self.seen: list[tuple[int, OpCode]] = []
        self.cancelled: list[int] = []
        self.active = 0
        self.peak = 0
        self.lock_priorities: list[tuple[str, int]] = []
        self.queue = JobQueue(
            self.store,
            self.execute,
            lambda: self.max_running,
            lambda owner, prio: self.lock_priorities.append((owner, prio)),
            drained=lambda: self.drained,
        )
        self.closed = False

    def gate(self, name: str) -> asyncio.Event:
        return self.gates.setdefault(name, asyncio.Event())

    def release(self, name: str) -> None:
        self.gate(name).set()

    async def execute(self, op: OpCode, ctx: OpContext) -> Any:
        self.started.append(ctx.job_id)
        self.seen.append((ctx.job_id, op))
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            comment = op.comment or ""
            if comment.startswith("wait:"):
                await self.gate(comment[5:]).wait()
            await ctx.notify_start()
            self.running.append(ctx.job_id)
            if comment.startswith("run:"):
                await self.gate(comment[4:]).wait()
            if isinstance(op, OpTestDelay):
                ctx.feedback(f"Sleeping {op.duration}")
                await asyncio.sleep(op.duration)
                return None
            if isinstance(op, OpTestJqueue):
                for msg in op.log_messages:
                    ctx.feedback("TESTMSG=" + msg)
                if op.fail:
                    raise errors.OpExecError("Opcode failure was requested")
                return True
            return None
        except asyncio.CancelledError:
            self.cancelled.append(ctx.job_id)
            raise
        finally:
            self.active -= 1

    async def status(self, job_id: int) -> str | None:
        row = (await self.queue.queries.query_jobs([job_id], ["status"]))[0]
        return None if row is None else row[0]

    async def row(self, job_id: int, *fields: str) -> list[Any]:
        row = (await self.queue.queries.query_jobs([job_id], list(fields)))[0]
        assert row is not None, f"job {job_id} unknown"
        return list(row)

    async def wait_status(
        self, job_id: int, wanted: frozenset[str] | set[str] = FINAL, timeout: float = 3.0
    ) -> str:
        """Poll the queue (not WaitForJobChange) until the job reaches a status."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            status = await self.status(job_id)
            if status is not None and status in wanted:
                return status
            if loop.time() > deadline:
                raise AssertionError(f"job {job_id} stuck in {status}, wanted {sorted(wanted)}")
            await asyncio.sleep(0.002)

    async def wait_opstatus(self, job_id: int, wanted: list[str], timeout: float = 3.0) -> None:
        """Poll the queue until the job's opcodes have these statuses."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (found := await self.row(job_id, "opstatus")) != [wanted]:
            if loop.time() > deadline:
                raise AssertionError(f"job {job_id}'s opcodes are {found}, wanted {wanted}")
            await asyncio.sleep(0.002)

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for event in self.gates.values():
            event.set()
        await self.queue.shutdown(0)
        await self.store.close()


async def settle(rounds: int = 10) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)
