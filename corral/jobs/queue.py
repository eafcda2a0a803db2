"""The job queue of masterd: submission, control and the life cycle, over its
parts: the journal (changes on their way to the store), the scheduler
(which job runs next) and the queries.

Unfinished jobs live in memory; finished jobs live only in the store.  A
submission is committed to the store before it is answered; a job leaves
memory only once its final state is on disk.  When the store cannot be
written, every job whose state could not be written ends in ``error``, with
the storage error as its result, as soon as that is on disk.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from corral import constants as C
from corral import errors
from corral.jobs import records
from corral.jobs.journal import Journal
from corral.jobs.listindex import LIST_COLUMNS, ListIndex
from corral.jobs.model import Job, LogEntry, QueuedOpCode, Unfinished
from corral.jobs.queries import JobQueries
from corral.jobs.runner import CANCELED_BY_REQUEST, OpExecutor
from corral.jobs.scheduler import Scheduler
from corral.jobs.states import advance
from corral.metrics.jobs import JobStats
from corral.objects.filter_rule import FilterRule
from corral.opcodes.base import OpCode, from_dict
from corral.state.ports import NO_FENCE, JobStore

log = logging.getLogger(__name__)


class JobQueue:
    """masterd's job queue."""

    def __init__(
        self,
        store: JobStore,
        executor: OpExecutor,
        max_running: Callable[[], int],
        lock_priority: Callable[[str, int], None] | None = None,
        filter_rules: Iterable[FilterRule] = (),
        drained: Callable[[], bool] = lambda: False,
    ) -> None:
        self._drained = drained
        self._lock_priority = lock_priority
        self.fence = NO_FENCE  # the master's fence token (masterd sets its lease's)
        self._unfinished = Unfinished()
        self._index = ListIndex()
        self._journal = Journal(
            store, self._index, lambda: self.fence, self._write_failed, self._released
        )
        self._scheduler = Scheduler(
            self, self._unfinished, store, executor, max_running, filter_rules
        )
        self.queries = JobQueries(self._unfinished, self._index, self._journal)
        self._last_id = 0

    @property
    def _jobs(self) -> dict[int, Job]:
        return self._unfinished.jobs

    @property
    def stats(self) -> JobStats:
        """The queue's job counts and durations (for the metrics)."""
        return self._index.stats

    # Submission
    async def submit(self, ops: Any, *, ignore_drain: bool = False) -> int:
        """Validate and queue one job; returns its id."""
        submitted = await self.submit_many([ops], ignore_drain=ignore_drain, single=True)
        return int(submitted[0][1])

    async def submit_many(
        self, jobs: Any, *, ignore_drain: bool = False, single: bool = False
    ) -> list[list[Any]]:
        """Queue several jobs; returns ``[True, job_id]`` per job.

        As luxid, the submission is accepted or refused as a whole: one bad
        opcode or dependency refuses every job of it.  Relative dependencies
        (negative ids) refer to earlier jobs of the same submission.
        """
        if not isinstance(jobs, list):
            raise errors.LuxiError("SubmitManyJobs expects a list of jobs")
        self._check_accepting(ignore_drain, len(jobs))
        parsed = []
        for index, ops in enumerate(jobs):
            try:
                parsed.append(_parse_ops(ops))
            except errors.GenericError as err:
                raise _in_job(err, index, len(jobs)) from None
        return await self._enqueue(parsed, single)

    async def submit_opcodes(self, jobs: list[list[OpCode]]) -> list[list[Any]]:
        """Queue jobs built inside masterd (from a logical unit)."""
        return await self._enqueue(list(jobs), single=False)

    def _check_accepting(self, ignore_drain: bool, count: int) -> None:
        if not self._scheduler.accepting:
            raise errors.JobQueueError("The master daemon is shutting down; not accepting jobs")
        if self._drained() and not ignore_drain:
            raise errors.JobQueueDrainError(
                "Job queue is drained, refusing job; undrain it with 'gnt-cluster queue undrain'"
            )
        if self.unfinished_count + count > C.JOB_QUEUE_SIZE_HARD_LIMIT:
            raise errors.JobQueueFull(
                f"Job queue is full: {self.unfinished_count} unfinished jobs"
                f" (limit {C.JOB_QUEUE_SIZE_HARD_LIMIT}); wait for some to finish"
            )

    async def _enqueue(self, parsed: list[list[OpCode]], single: bool) -> list[list[Any]]:
        new_jobs: list[Job] = []

        def build(ids: list[int]) -> list[dict[str, Any]]:
            # A store may call this again (its write raced another): each call
            # starts from the opcodes as submitted.
            new_jobs.clear()
            for index, (submitted, job_id) in enumerate(zip(parsed, ids, strict=True)):
                ops = [_as_submitted(op) for op in submitted]
                try:
                    _resolve_relative_deps(ops, [job.id for job in new_jobs], single)
                    _check_dependencies_earlier(ops, job_id)
                except errors.GenericError as err:
                    raise _in_job(err, index, len(parsed)) from None
                _add_reason(ops, job_id)
                new_jobs.append(Job(job_id, [QueuedOpCode(op, priority=op.priority) for op in ops]))
            return [records.job_row(job) for job in new_jobs]

        # Committed (one fsync) before the client hears of the jobs.
        await self._journal.insert(len(parsed), build)
        for job in new_jobs:
            self._unfinished.add(job)
            self._scheduler.push(job)
            self._last_id = max(self._last_id, job.id)
        self._scheduler.reject_matching(new_jobs)
        self._scheduler.schedule()
        return [[True, job.id] for job in new_jobs]

    @property
    def last_job_id(self) -> int:
        """The highest job id given out so far (a new filter rule's watermark)."""
        return self._last_id

    def set_filter_rules(self, rules: Iterable[FilterRule]) -> None:
        """Apply changed filter rules to every job not started yet, as luxid does."""
        self._scheduler.set_filter_rules(rules)
        self.start()

    # Changes of a job (the runner and the scheduler report them here)
    def save(self, job: Job) -> None:
        """Queue the job's state for the store and wake its subscribers."""
        error = self._journal.write_error
        if error is not None and job.write_error is None:
            # The store fails: this change would not reach it either.
            self._fail_job(job, error)
            if job.write_error is not None and job.task is None:
                return  # _fail_job saved the job as failed
        self._journal.save(records.job_row(job))
        job.notify_change()

    async def durable(self, job: Job) -> None:
        """Until the job's state saved so far is in the store (see Journal.durable)."""
        await self._journal.durable(job.id)

    def add_log(self, job: Job, op: QueuedOpCode, kind: str, message: Any) -> None:
        job.log_serial += 1
        entry = LogEntry(job.log_serial, time.time(), kind, message)
        op_idx = job.ops.index(op)
        self._journal.log((job.id, op_idx, entry.serial, entry.timestamp, kind, message))
        self._unfinished.logs.setdefault(job.id, []).append((op_idx, entry))
        self.save(job)

    def release_slot(self, job: Job) -> None:
        """See :meth:`Scheduler.release_slot`."""
        self._scheduler.release_slot(job)

    def finalize(self, job: Job) -> None:
        """Let the job go once its final state is on disk."""
        self._journal.finishing(job.id)

    def _released(self, job_ids: list[int]) -> None:
        """The final states of these jobs are on disk: they leave memory."""
        for job_id in job_ids:
            job = self._jobs.get(job_id)
            if job is not None and job.status in C.JOB_STATUS_FINALIZED:
                self._unfinished.drop(job_id)
                job.notify_change()
                self._scheduler.released(job)
        if self._scheduler.accepting:
            self._scheduler.schedule()

    def _write_failed(self, err: errors.JobQueueError, job_ids: list[int]) -> None:
        for job_id in job_ids:
            job = self._jobs.get(job_id)
            if job is not None:
                self._fail_job(job, err)

    def _fail_job(self, job: Job, err: errors.JobQueueError) -> None:
        """A job whose state could not be written ends in error.

        An opcode that runs is left to finish (stopping it half-way could leave
        a half-made instance behind); the job fails when its task ends.
        """
        if job.write_error is not None and job.status in C.JOB_STATUS_FINALIZED:
            return
        job.write_error = err.message
        if job.task is not None and job.status == C.JOB_STATUS_QUEUED:
            self._scheduler.drop_unstarted(job)
        if job.task is None:
            records.fail_for_storage(job)
            self.save(job)
            self.finalize(job)
        elif job.status != C.JOB_STATUS_RUNNING:
            job.task.cancel()  # waiting for locks or dependencies: stop waiting

    # Control
    async def cancel(self, job_id: int, kill: bool = False) -> list[Any]:
        """Cancel a job: ``[success, message]`` with luxid's messages.

        A queued job is dequeued; a job waiting (for locks or dependencies) is
        cancelled and waited for; a running one only with ``kill``.
        """
        job = self._jobs.get(job_id)
        if job is None or job.status in C.JOB_STATUS_FINALIZED:
            # Finished, possibly with its final state still on its way to disk.
            return [False, f"Job {job_id} not found in queue"]
        status = job.status
        if status == C.JOB_STATUS_RUNNING and not kill:
            return [False, "Job no longer waiting, can't cancel"]
        job.cancel_requested = True
        if job.task is not None and status == C.JOB_STATUS_QUEUED:
            self._scheduler.drop_unstarted(job)
        if job.task is None:
            if status == C.JOB_STATUS_QUEUED:
                # As luxid's dequeue: no result, no start.
                self._cancel_now(job, None)
                return [True, f"Dequeued job {job_id}"]
            self._cancel_now(job, CANCELED_BY_REQUEST)
            return [True, "Job successfully cancelled"]
        for op in job.ops:
            if not op.finished:
                advance(op, C.OP_STATUS_CANCELING)
        self.save(job)
        job.task.cancel()
        return await _cancellation(job)

    def _cancel_now(self, job: Job, result: str | None) -> None:
        now = time.time()
        for op in job.ops:
            if not op.finished:
                advance(op, C.OP_STATUS_CANCELED)
                op.result = result
                op.end_timestamp = now
        job.end_timestamp = now
        self.save(job)
        self.finalize(job)
        self._scheduler.schedule()

    def change_priority(self, job_id: int, priority: int) -> list[Any]:
        """Change the priority of a job's unfinished opcodes."""
        if not (C.OP_PRIO_HIGHEST <= priority <= C.OP_PRIO_LOWEST):
            raise errors.OpPrereqError(
                f"Priority {priority} is out of range {C.OP_PRIO_HIGHEST}..{C.OP_PRIO_LOWEST}",
                C.ECODE_INVAL,
            )
        job = self._jobs.get(job_id)
        # A finished job stays in memory until it is on disk: it is no longer queued.
        if job is None or job.status in C.JOB_STATUS_FINALIZED:
            return [False, f"Job {job_id} not found in queue"]
        for op in job.ops:
            if not op.finished:
                op.priority = priority
        self.save(job)
        if job.task is None:
            self._scheduler.push(job)
            self._scheduler.schedule()
        elif self._lock_priority is not None:
            self._lock_priority(str(job.id), priority)
        return [
            True,
            f"Priorities of pending opcodes for job {job_id} have been changed to {priority}",
        ]

    async def archive(self, job_id: int) -> bool:
        """Archive a finished job; False (as luxid) if it is not finished or unknown."""
        await self.flush()  # a job finished in memory is archived once it is on disk
        if job_id in self._jobs:
            return False
        return await self._journal.archive([job_id]) == 1

    async def auto_archive(self, age: float, timeout: float) -> list[int]:
        """Archive finished jobs older than ``age`` seconds (-1: all); ``[archived, left]``."""
        await self.flush()
        cutoff = None if age < 0 else time.time() - age
        ids = await self._journal.store.finished_before(cutoff)
        deadline = time.monotonic() + max(timeout, 0)
        archived = 0
        for start in range(0, len(ids), 1000):
            archived += await self._journal.archive(ids[start : start + 1000])
            if time.monotonic() > deadline:
                break
        return [archived, len(ids) - archived]

    # Life cycle
    async def recover(self, interrupted: str = records.UNCLEAN_SHUTDOWN) -> None:
        """After a restart: finish interrupted jobs as errors (``interrupted``
        says why), requeue waiting ones."""
        store = self._journal.store
        self._last_id = await store.last_id()
        for row in await store.fetch(None, LIST_COLUMNS):
            self._index.put(row)
        rows = await store.fetch(await store.unfinished_ids(), list(records.ROW_COLUMNS))
        recovered = []
        for row in rows:
            job = records.job_from_row(row)
            records.recover_job(job, interrupted)
            row = records.job_row(job)
            recovered.append(row)
            self._index.put(row)
            if job.status in C.JOB_STATUS_FINALIZED:
                log.warning(
                    "Job %s was interrupted by a restart; finished as %s", job.id, job.status
                )
                continue
            # Log entries of opcodes that finished before the restart.
            logs = [(op_idx, LogEntry(*entry)) for op_idx, entry in await store.fetch_logs(job.id)]
            self._unfinished.add(job, logs)
            self._scheduler.push(job)
        await store.write_batch(recovered, [], self.fence)

    def start(self) -> None:
        """Start running jobs, once the filter rules are applied to those queued."""
        self._scheduler.reject_matching(list(self._jobs.values()))
        self._scheduler.schedule()

    async def shutdown(self, grace: float) -> None:
        """Stop taking jobs; give running ones ``grace`` seconds, then stop them."""
        self._journal.stop_retrying()
        await self._scheduler.stop(grace)
        await self.flush()

    async def flush(self) -> None:
        """Wait until every queued change is on disk, or the store fails."""
        await self._journal.flush()

    @property
    def unfinished_count(self) -> int:
        """Jobs not finished (those finished but not yet on disk do not count)."""
        return len(self._jobs) - self._journal.unreleased


async def _cancellation(job: Job) -> list[Any]:
    """Wait for a cancelled job to end, and say how it ended (as luxid)."""
    deadline = time.monotonic() + C.LUXI_CANCEL_JOB_TIMEOUT
    while job.status not in C.JOB_STATUS_FINALIZED:
        remaining = deadline - time.monotonic()
        try:
            await asyncio.wait_for(job.change_event().wait(), max(remaining, 0))
        except TimeoutError:
            return [False, f"Job could not be canceled, status {job.status}"]
    if job.status == C.JOB_STATUS_CANCELED:
        return [True, "Job successfully cancelled"]
    return [False, f"Job exited before it could have been canceled, status {job.status}"]


def _parse_ops(ops: Any) -> list[OpCode]:
    if not isinstance(ops, list) or not ops:
        raise errors.OpPrereqError("A job must be a non-empty list of opcodes", C.ECODE_INVAL)
    return [from_dict(op) for op in ops]


def _resolve_relative_deps(ops: list[OpCode], batch_ids: list[int], single: bool) -> None:
    for op in ops:
        for dep in op.depends or []:
            if dep[0] >= 0:
                continue
            pos = len(batch_ids) + dep[0]
            if single or pos < 0:
                raise errors.OpPrereqError(
                    f"Relative job dependency {dep[0]} does not name a job of this submission",
                    C.ECODE_INVAL,
                )
            dep[0] = batch_ids[pos]


def _check_dependencies_earlier(ops: list[OpCode], job_id: int) -> None:
    """Only earlier jobs can be waited for, so dependencies never form a cycle."""
    for op in ops:
        for dep in op.depends or []:
            if dep[0] >= job_id:
                raise errors.OpPrereqError(
                    f"Job {job_id} cannot depend on job {dep[0]}: only earlier jobs can be"
                    " waited for",
                    C.ECODE_INVAL,
                )


def _in_job(err: errors.GenericError, index: int, count: int) -> errors.GenericError:
    """``err`` naming the job it is about, in a submission of several."""
    if count > 1:
        err.args = (f"Job {index + 1} of {count} submitted: {err.message}", *err.args[1:])
    return err


def _as_submitted(op: OpCode) -> OpCode:
    """A copy of ``op`` whose reason trail and dependencies can change alone."""
    depends = None if op.depends is None else [list(dep) for dep in op.depends]
    return op.model_copy(update={"reason": [list(r) for r in op.reason], "depends": depends})


def _add_reason(ops: list[OpCode], job_id: int) -> None:
    """Record in each opcode's reason trail which job and index it became."""
    for index, op in enumerate(ops):
        source = f"gnt:opcode:{op.OP_ID[3:].lower()}"
        op.reason.append([source, f"job={job_id};index={index}", time.time_ns()])
