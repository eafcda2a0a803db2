"""Running one job: its opcodes in order, with dependencies, log and cancel."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from corral import constants as C
from corral import errors
from corral.jobs.model import Job, QueuedOpCode
from corral.jobs.states import advance
from corral.opcodes.base import scrub

if TYPE_CHECKING:
    from corral.jobs.queue import JobQueue
    from corral.opcodes.base import OpCode

log = logging.getLogger(__name__)

PRECEDING_FAILED = "Preceding opcode failed"
CANCELED_BY_REQUEST = "Job canceled by request"


class OpContext:
    """What a running opcode may do to its job: report, log, spawn jobs."""

    def __init__(self, queue: JobQueue, job: Job, op: QueuedOpCode) -> None:
        self._queue = queue
        self.job = job
        self.op = op
        # Private values the opcode met on its way (an instance's stored ones):
        # scrubbed, like its own secret and private values, from all it reports.
        self._hidden: set[str] = set()

    def hide(self, values: list[str]) -> None:
        """Scrub ``values`` from this opcode's log entries, result and error."""
        self._hidden.update(v for v in values if v)

    def scrub_values(self) -> list[str]:
        """Everything to scrub, longest first (a value may contain another)."""
        values = self._hidden.union(self.op.input.hidden_values())
        return sorted(values, key=len, reverse=True)

    @property
    def job_id(self) -> int:
        return self.job.id

    @property
    def priority(self) -> int:
        return self.op.priority

    async def notify_start(self) -> None:
        """The opcode holds its locks and starts executing, once that is in
        the store: a master taking over must never run it again (as Ganeti,
        which writes the job before the opcode's Exec)."""
        advance(self.op, C.OP_STATUS_RUNNING)
        self.op.exec_timestamp = time.time()
        self._queue.save(self.job)
        await self._queue.durable(self.job)

    def notify_retry(self) -> None:
        """The opcode goes back to waiting for locks (more of them: Ganeti's
        NotifyRetry, after a unit's PrepareRetry)."""
        if self.op.status == C.OP_STATUS_RUNNING:
            advance(self.op, C.OP_STATUS_WAITING)
            self._queue.save(self.job)

    def release_slot(self) -> None:
        """The job's last opcode only waits for files now (its locks are
        free): its running slot may go to the next job.  A job with more
        opcodes keeps its slot."""
        if self.op is self.job.ops[-1]:
            self._queue.release_slot(self.job)

    def feedback(self, message: Any, kind: str = C.ELOG_MESSAGE) -> None:
        """Append an entry to the opcode's log (seen by WaitForJobChange)."""
        message = scrub(message, self.scrub_values())
        self._queue.add_log(self.job, self.op, kind, message)

    async def submit_jobs(self, jobs: list[list[OpCode]]) -> list[list[Any]]:
        """Submit follow-up jobs (as Ganeti's ResultWithJobs)."""
        return await self._queue.submit_opcodes(jobs)


class OpExecutor(Protocol):
    def __call__(self, op: OpCode, ctx: OpContext) -> Awaitable[Any]: ...


async def run_job(
    queue: JobQueue,
    job: Job,
    execute: OpExecutor,
    wait_dependencies: Callable[[Job, QueuedOpCode], Awaitable[None]],
) -> None:
    """Run the unfinished opcodes of ``job`` one after the other."""
    if job.start_timestamp is None:
        job.start_timestamp = time.time()
    for index, qop in enumerate(job.ops):
        if qop.finished:
            continue
        advance(qop, C.OP_STATUS_WAITING)
        qop.start_timestamp = time.time()
        queue.save(job)
        ctx = OpContext(queue, job, qop)
        try:
            await wait_dependencies(job, qop)
            if job.cancel_requested:
                raise asyncio.CancelledError()
            result = await execute(qop.input, ctx)
        except asyncio.CancelledError:
            if not job.cancel_requested:
                raise  # masterd is stopping: leave the job for recovery
            # As Ganeti: the reason itself, not an encoded error.
            _finish_rest(job, index, C.OP_STATUS_CANCELED, CANCELED_BY_REQUEST, encode=False)
            break
        except Exception as err:
            if not isinstance(err, errors.GenericError):
                secrets = ctx.scrub_values()
                # A traceback could quote a secret: with secrets, the scrubbed message only.
                log.error(
                    "Job %s: unexpected error in opcode %s: %s",
                    job.id,
                    qop.input.OP_ID,
                    scrub(repr(err), secrets),
                    exc_info=not secrets,
                )
            advance(qop, C.OP_STATUS_ERROR)
            qop.result = scrub(errors.encode_exception(err), ctx.scrub_values())
            qop.end_timestamp = time.time()
            _finish_rest(job, index + 1, C.OP_STATUS_ERROR, PRECEDING_FAILED, encode=True)
            break
        else:
            advance(qop, C.OP_STATUS_SUCCESS)
            qop.result = scrub(result, ctx.scrub_values())
            qop.end_timestamp = time.time()
            if index + 1 < len(job.ops):
                queue.save(job)
    job.end_timestamp = time.time()
    queue.save(job)


def _finish_rest(job: Job, start: int, status: str, message: str, *, encode: bool) -> None:
    """Give every opcode from ``start`` on a final status and a reason."""
    now = time.time()
    for qop in job.ops[start:]:
        if qop.finished:
            continue
        advance(qop, status)
        qop.result = errors.encode_exception(errors.OpExecError(message)) if encode else message
        qop.end_timestamp = now
