"""The job queue of masterd: submission, scheduling, control and queries.

Unfinished jobs live in memory; finished jobs live only in the store.  Every
change of a job is queued for the store and written in groups: one batch per
turn of the event loop, committed (one fsync) in a worker thread
(``_flush``).  A submission is committed before it is answered.  A job leaves
memory only once its final state is on disk.

When the store cannot be written (full disk, I/O error, read-only file system)
the changes stay queued and are retried on the next change and every
``WRITE_RETRY`` seconds; every job whose state could not be written ends in
``error``, with the storage error as its result, as soon as that is on disk.

Up to ``max_running_jobs`` run at once, by priority then id.  A job whose
dependencies are unfinished waits without taking a slot.  Subscribers to a
job are woken by the change itself.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from corral import constants as C
from corral import errors
from corral.gcpause import gc_paused
from corral.jobs import records
from corral.jobs.fields import JOB_FIELDS
from corral.jobs.filters import JobFilters, reject
from corral.jobs.listindex import DEFAULT_FIELDS, ListIndex
from corral.jobs.model import Job, LogEntry, QueuedOpCode
from corral.jobs.runner import CANCELED_BY_REQUEST, OpExecutor, run_job
from corral.jobs.store import JobStore, LogRow
from corral.luxi import protocol
from corral.luxi.protocol import Encoded
from corral.objects.filter_rule import FilterRule
from corral.opcodes.base import OpCode, from_dict
from corral.query.fields import UNAVAIL, cell, plain
from corral.query.filter import filter_fields, requested_names, simple_filter

log = logging.getLogger(__name__)

# Seconds between attempts to write changes the store refused (full disk...).
WRITE_RETRY = 1.0


class JobQueue:
    """masterd's job queue."""

    def __init__(
        self,
        store: JobStore,
        drain_file: Path,
        executor: OpExecutor,
        max_running: Callable[[], int],
        lock_priority: Callable[[str, int], None] | None = None,
        filter_rules: Iterable[FilterRule] = (),
    ) -> None:
        self._store = store
        self._index = ListIndex(store)
        self._drain_file = drain_file
        self._execute = executor
        self._max_running = max_running
        self._lock_priority = lock_priority
        self._jobs: dict[int, Job] = {}
        self._logs: dict[int, list[tuple[int, LogEntry]]] = {}
        self._ready: list[tuple[int, int]] = []  # heap of (priority, job id)
        self._running: set[int] = set()
        self._dependents: dict[int, set[int]] = {}
        self._accepting = True
        self._filters = JobFilters(filter_rules)
        self._held: set[int] = set()  # jobs a filter rule holds back (PAUSE, RATE_LIMIT)
        # Group commit: changes not yet handed to the store, and jobs that are
        # finished in memory but wait for their final state to be on disk.
        self._dirty: dict[int, dict[str, Any]] = {}
        self._dirty_logs: list[LogRow] = []
        self._inflight: dict[int, dict[str, Any]] = {}  # the batch being committed
        self._finishing: set[int] = set()
        self._flush_task: asyncio.Task[None] | None = None
        self._retry: asyncio.TimerHandle | None = None
        self._write_error: errors.JobQueueError | None = None

    # Submission
    @property
    def drained(self) -> bool:
        return self._drain_file.exists()

    def set_drain(self, flag: bool) -> None:
        if flag:
            self._drain_file.touch()
        else:
            self._drain_file.unlink(missing_ok=True)

    def submit(self, ops: Any, *, ignore_drain: bool = False) -> int:
        """Validate and queue one job; returns its id."""
        return int(self.submit_many([ops], ignore_drain=ignore_drain, single=True)[0][1])

    def submit_many(
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
                parsed.append(self._parse_ops(ops))
            except errors.GenericError as err:
                raise _in_job(err, index, len(jobs)) from None
        return self._enqueue(parsed, single)

    def submit_opcodes(self, jobs: list[list[OpCode]]) -> list[list[Any]]:
        """Queue jobs built inside masterd (from a logical unit)."""
        return self._enqueue(list(jobs), single=False)

    def _check_accepting(self, ignore_drain: bool, count: int) -> None:
        if not self._accepting:
            raise errors.JobQueueError("The master daemon is shutting down; not accepting jobs")
        if self.drained and not ignore_drain:
            raise errors.JobQueueDrainError(
                "Job queue is drained, refusing job; undrain it with 'gnt-cluster queue undrain'"
            )
        if self.unfinished_count + count > C.JOB_QUEUE_SIZE_HARD_LIMIT:
            raise errors.JobQueueFull(
                f"Job queue is full: {self.unfinished_count} unfinished jobs"
                f" (limit {C.JOB_QUEUE_SIZE_HARD_LIMIT}); wait for some to finish"
            )

    @staticmethod
    def _parse_ops(ops: Any) -> list[OpCode]:
        if not isinstance(ops, list) or not ops:
            raise errors.OpPrereqError("A job must be a non-empty list of opcodes", C.ECODE_INVAL)
        return [from_dict(op) for op in ops]

    def _enqueue(self, parsed: list[list[OpCode]], single: bool) -> list[list[Any]]:
        new_jobs: list[Job] = []

        def build(ids: list[int]) -> list[dict[str, Any]]:
            for index, (ops, job_id) in enumerate(zip(parsed, ids, strict=True)):
                try:
                    self._resolve_relative_deps(ops, [job.id for job in new_jobs], single)
                    _check_dependencies_earlier(ops, job_id)
                except errors.GenericError as err:
                    raise _in_job(err, index, len(parsed)) from None
                _add_reason(ops, job_id)
                new_jobs.append(Job(job_id, [QueuedOpCode(op, priority=op.priority) for op in ops]))
            return [records.job_row(job) for job in new_jobs]

        # Committed (one fsync) before the client hears of the jobs.
        for row in self._store.insert_new(len(parsed), build):
            self._index.put(row)
        for job in new_jobs:
            self._jobs[job.id] = job
            self._logs[job.id] = []
            heapq.heappush(self._ready, (job.priority, job.id))
        self._reject_matching(new_jobs)
        self._schedule()
        return [[True, job.id] for job in new_jobs]

    @staticmethod
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

    # Scheduling
    def _schedule(self) -> None:
        limit = self._max_running()
        self._requeue_held()
        gate = self._filters.gate(self._jobs[job_id] for job_id in self._running)
        while self._ready and len(self._running) < limit and self._accepting:
            priority, job_id = heapq.heappop(self._ready)
            job = self._jobs.get(job_id)
            if job is None or job.task is not None or job.status in C.JOB_STATUS_FINALIZED:
                continue
            if priority != job.priority:
                continue  # stale entry: change_priority pushed one with the new priority
            pending = self._unfinished_deps(job)
            if pending:
                self._park(job, pending)
                continue
            if gate is not None and not gate.admit(job):
                self._held.add(job_id)
                continue
            self._running.add(job_id)
            job.task = asyncio.get_running_loop().create_task(self._run(job), name=f"job-{job_id}")

    def _requeue_held(self) -> None:
        """Jobs a filter rule held back are looked at again on every pass, as luxid
        filters its whole queue each time it schedules."""
        for job_id in self._held:
            job = self._jobs.get(job_id)
            if job is not None:
                heapq.heappush(self._ready, (job.priority, job_id))
        self._held.clear()

    def _reject_matching(self, jobs: list[Job]) -> None:
        """Cancel the jobs not started yet that a REJECT filter rule applies to."""
        for job in jobs:
            rule = self._filters.rejecting(job) if job.task is None else None
            if rule is not None:
                reject(job, rule)
                self.save(job)
                self._finalize(job)

    def set_filter_rules(self, rules: Iterable[FilterRule]) -> None:
        """Apply changed filter rules to every job not started yet, as luxid does."""
        self._filters = JobFilters(rules)
        self.start()

    @property
    def last_job_id(self) -> int:
        """The highest job id given out so far (a new filter rule's watermark)."""
        return self._store.last_id()

    def _park(self, job: Job, pending: set[int]) -> None:
        """Wait for dependencies without taking a running slot."""
        for dep in pending:
            self._dependents.setdefault(dep, set()).add(job.id)
        op = self._current_op(job)
        if op is not None and op.status == C.OP_STATUS_QUEUED:
            op.status = C.OP_STATUS_WAITING
            op.start_timestamp = time.time()
            self.save(job)

    def _unfinished_deps(self, job: Job) -> set[int]:
        op = self._current_op(job)
        if op is None:
            return set()
        return {dep[0] for dep in op.input.depends or [] if dep[0] in self._jobs}

    @staticmethod
    def _current_op(job: Job) -> QueuedOpCode | None:
        return next((op for op in job.ops if not op.finished), None)

    async def _run(self, job: Job) -> None:
        try:
            await run_job(self, job, self._execute, self._check_dependencies)
        except asyncio.CancelledError:
            if job.write_error is None:
                raise
        finally:
            self._running.discard(job.id)
            job.task = None
            if job.write_error is not None:
                records.fail_for_storage(job)
                self.save(job)
            if job.status in C.JOB_STATUS_FINALIZED:
                self._finalize(job)
            if self._accepting:
                self._schedule()

    async def _check_dependencies(self, job: Job, op: QueuedOpCode) -> None:
        """Wait for the opcode's dependencies; fail it if one ended wrongly."""
        for dep_id, allowed in op.input.depends or []:
            while dep_id in self._jobs:
                await self._jobs[dep_id].change_event().wait()
            rows = self._store.fetch([dep_id], ["status"], archived=True)
            if not rows:
                raise errors.OpExecError(f"Dependency job {dep_id} not found")
            status = rows[0]["status"]
            if allowed and status not in allowed:
                raise errors.OpExecError(
                    f"Dependency job {dep_id} finished with status '{status}', not one of"
                    f" {', '.join(allowed)}"
                )

    def _finalize(self, job: Job) -> None:
        """Let the job go once its final state is on disk."""
        self._finishing.add(job.id)
        self._kick()

    def _release_durable(self) -> None:
        """Release the finished jobs whose final state has been committed."""
        done = [job_id for job_id in self._finishing if job_id not in self._dirty]
        for job_id in done:
            self._finishing.discard(job_id)
            job = self._jobs.get(job_id)
            if job is not None and job.status in C.JOB_STATUS_FINALIZED:
                self._release(job)
        if done and self._accepting:
            self._schedule()

    def _release(self, job: Job) -> None:
        self._jobs.pop(job.id, None)
        self._logs.pop(job.id, None)
        job.notify_change()
        for waiter_id in self._dependents.pop(job.id, set()):
            waiter = self._jobs.get(waiter_id)
            if waiter is not None and waiter.task is None:
                heapq.heappush(self._ready, (waiter.priority, waiter_id))

    # Changes of a job
    def save(self, job: Job) -> None:
        """Queue the job's state for the store and wake its subscribers."""
        if self._write_error is not None and job.write_error is None:
            # The store fails: this change would not reach it either.
            self._fail_job(job, self._write_error)
            if job.write_error is not None and job.task is None:
                return  # _fail_job saved the job as failed
        row = records.job_row(job)
        self._dirty[job.id] = row
        self._index.put(row)
        job.notify_change()
        self._kick()

    def add_log(self, job: Job, op: QueuedOpCode, kind: str, message: Any) -> None:
        job.log_serial += 1
        entry = LogEntry(job.log_serial, time.time(), kind, message)
        op_idx = job.ops.index(op)
        self._dirty_logs.append((job.id, op_idx, entry.serial, entry.timestamp, kind, message))
        self._logs.setdefault(job.id, []).append((op_idx, entry))
        self.save(job)

    # Group commit
    def _kick(self) -> None:
        """Start a flush of the queued changes, unless one runs already."""
        if self._flush_task is None and (self._dirty or self._dirty_logs or self._finishing):
            self._flush_task = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        """Commit what changed, in batches, until nothing is left or the store fails."""
        try:
            while True:
                # Jobs whose final state the last batch committed may go now.
                self._release_durable()
                if not (self._dirty or self._dirty_logs):
                    break
                rows, logs = self._dirty, self._dirty_logs
                self._dirty, self._dirty_logs = {}, []
                self._inflight = rows
                try:
                    await asyncio.to_thread(self._store.write_batch, list(rows.values()), logs)
                except errors.JobQueueError as err:  # the store cannot be written
                    self._inflight = {}
                    # Keep the batch (newer changes of a job win) and retry later.
                    self._dirty = rows | self._dirty
                    self._dirty_logs = logs + self._dirty_logs
                    self._write_failed(err, list(self._dirty))
                    return
                self._inflight = {}
                if self._write_error is not None:
                    log.warning("The job queue can be written again")
                    self._write_error = None
        finally:
            self._flush_task = None

    def _write_failed(self, err: errors.JobQueueError, job_ids: list[int]) -> None:
        if self._write_error is None:
            log.error("%s", err.message)
        self._write_error = err
        if self._retry is None or self._retry.cancelled():
            self._retry = asyncio.get_running_loop().call_later(WRITE_RETRY, self._retry_write)
        for job_id in job_ids:
            job = self._jobs.get(job_id)
            if job is not None:
                self._fail_job(job, err)

    def _retry_write(self) -> None:
        self._retry = None
        self._kick()

    def _fail_job(self, job: Job, err: errors.JobQueueError) -> None:
        """A job whose state could not be written ends in error.

        An opcode that runs is left to finish (stopping it half-way could leave
        a half-made instance behind); the job fails when its task ends.
        """
        if job.write_error is not None and job.status in C.JOB_STATUS_FINALIZED:
            return
        job.write_error = err.message
        if job.task is not None and job.status == C.JOB_STATUS_QUEUED:
            self._drop_unstarted_task(job)
        if job.task is None:
            records.fail_for_storage(job)
            self.save(job)
            self._finalize(job)
        elif job.status != C.JOB_STATUS_RUNNING:
            job.task.cancel()  # waiting for locks or dependencies: stop waiting

    def _drop_unstarted_task(self, job: Job) -> None:
        """A task cancelled before its first step never runs its body (nor its
        clean-up), so it is dropped here."""
        if job.task is not None:
            job.task.cancel()
            job.task = None
        self._running.discard(job.id)

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
            self._drop_unstarted_task(job)
        if job.task is None:
            if status == C.JOB_STATUS_QUEUED:
                # As luxid's dequeue: no result, no start.
                self._cancel_now(job, None)
                return [True, f"Dequeued job {job_id}"]
            self._cancel_now(job, CANCELED_BY_REQUEST)
            return [True, "Job successfully cancelled"]
        for op in job.ops:
            if not op.finished:
                op.status = C.OP_STATUS_CANCELING
        self.save(job)
        job.task.cancel()
        return await self._cancellation(job)

    async def _cancellation(self, job: Job) -> list[Any]:
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

    def _cancel_now(self, job: Job, result: str | None) -> None:
        now = time.time()
        for op in job.ops:
            if not op.finished:
                op.status = C.OP_STATUS_CANCELED
                op.result = result
                op.end_timestamp = now
        job.end_timestamp = now
        self.save(job)
        self._finalize(job)
        self._schedule()

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
            heapq.heappush(self._ready, (job.priority, job.id))
            self._schedule()
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
        moved = self._store.archive([job_id]) == 1
        if moved:
            self._index.drop([job_id])
        return moved

    async def auto_archive(self, age: float, timeout: float) -> list[int]:
        """Archive finished jobs older than ``age`` seconds (-1: all); ``[archived, left]``."""
        await self.flush()
        cutoff = None if age < 0 else time.time() - age
        ids = self._store.finished_before(cutoff)
        deadline = time.monotonic() + max(timeout, 0)
        archived = 0
        for start in range(0, len(ids), 1000):
            archived += self._store.archive(ids[start : start + 1000])
            self._index.drop(ids[start : start + 1000])
            if time.monotonic() > deadline:
                break
        return [archived, len(ids) - archived]

    # Queries
    def query(self, fields: list[str], qfilter: Any, archived: bool = False) -> Any:
        """Query("job"); the whole queue's default listing comes pre-encoded."""
        if tuple(fields) == DEFAULT_FIELDS and qfilter is None and not archived:
            definitions = protocol.dumps(JOB_FIELDS.definitions(fields)).decode()
            return Encoded(f'{{"fields":{definitions},"data":{self._index.listing()}}}')
        return self._query(fields, qfilter, archived)

    def _query(self, fields: list[str], qfilter: Any, archived: bool) -> dict[str, Any]:
        wanted = requested_names(qfilter, "id")
        if wanted is not None:
            return self._query_wanted(fields, wanted)
        # As in Ganeti, asking for the "archived" field looks in the archive too.
        archived = archived or "archived" in fields
        with gc_paused():
            return JOB_FIELDS.query(fields, qfilter, self._records(None, fields, qfilter, archived))

    def _query_wanted(self, fields: list[str], wanted: list[Any]) -> dict[str, Any]:
        """Jobs asked for by id, as luxid answers: archived ones too, and a row
        for each id, with only the id known for a job that does not exist."""
        ids = [_wanted_id(value) for value in wanted]
        found = {r["id"]: r for r in self._records(ids, fields, None, archived=True)}
        getters = [JOB_FIELDS.fields.get(name) for name in fields]
        data = []
        for job_id in ids:
            record = found.get(job_id)
            row = []
            for name, field in zip(fields, getters, strict=True):
                if field is None:
                    row.append([C.RS_UNKNOWN, None])
                elif record is not None:
                    row.append(cell(field.getter(record)))
                else:
                    row.append(cell(job_id if name == "id" else UNAVAIL))
            data.append(row)
        return {"fields": JOB_FIELDS.definitions(fields), "data": data}

    def query_jobs(self, job_ids: list[int] | None, fields: list[str]) -> list[Any]:
        """QueryJobs: luxid's classic query, a row of plain values per job (for an
        unknown job, nothing but its id)."""
        _check_fields(fields)
        with gc_paused():
            result = self._query(fields, simple_filter("id", job_ids or []), False)
        return [[value for _status, value in row] for row in result["data"]]

    def _records(
        self, job_ids: list[int] | None, fields: list[str], qfilter: Any, archived: bool
    ) -> list[dict[str, Any]]:
        needs = JOB_FIELDS.needs(fields) | JOB_FIELDS.needs(filter_fields(qfilter))
        if not archived and self._index.covers(needs):
            return self._index.rows(job_ids)
        columns = [c for c in records.ROW_COLUMNS if c in needs]
        rows = self._store.fetch(job_ids, columns, archived)
        if "logs" in needs:
            for row in rows:
                row["logs"] = self._store.fetch_logs(row["id"], archived=bool(row["archived"]))
        if self._dirty or self._inflight:
            rows = [self._newest(row) for row in rows]
        return rows

    def _newest(self, row: dict[str, Any]) -> dict[str, Any]:
        """A job's row as in memory if the store has not caught up with it yet."""
        job_id = row["id"]
        job = self._jobs.get(job_id)
        if job is None or (job_id not in self._dirty and job_id not in self._inflight):
            return row
        return records.job_record(job, self._logs.get(job_id, []))

    async def wait_for_change(
        self,
        job_id: int,
        fields: list[str],
        prev_info: Any,
        prev_serial: int | None,
        timeout: float,
    ) -> Any:
        """Return ``[job_info, new_log_entries]`` once either differs, or "nochange"."""
        _check_fields(fields)
        deadline = time.monotonic() + min(max(timeout, 0.0), C.LUXI_WFJC_TIMEOUT)
        prev_serial = prev_serial or 0
        while True:
            job = self._jobs.get(job_id)
            if job is None:
                return self._finished_change(job_id, fields, prev_serial)
            info = self._memory_info(job, fields)
            entries = [e.to_wire() for _, e in self._logs.get(job_id, []) if e.serial > prev_serial]
            if info != prev_info or entries:
                return [info, entries]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "nochange"
            try:
                await asyncio.wait_for(job.change_event().wait(), remaining)
            except TimeoutError:
                return "nochange"

    def _memory_info(self, job: Job, fields: list[str]) -> list[Any]:
        record = records.job_record(job, self._logs.get(job.id, []))
        return [plain(JOB_FIELDS.fields[f].getter(record)) for f in fields]

    def _finished_change(self, job_id: int, fields: list[str], prev_serial: int) -> Any:
        rows_all = self._store.fetch([job_id], [], archived=True)
        if not rows_all:
            raise errors.JobLost(f"Job {job_id} not found")
        rows = self.query_jobs([job_id], fields)
        archived = bool(rows_all[0]["archived"])
        entries = [
            [e[0], records.split_time(e[1]), e[2], e[3]]
            for _, e in self._store.fetch_logs(job_id, prev_serial, archived=archived)
        ]
        return [rows[0], entries]

    # Life cycle
    def recover(self) -> None:
        """After a restart: finish interrupted jobs as errors, requeue waiting ones."""
        rows = self._store.fetch(self._store.unfinished_ids(), list(records.ROW_COLUMNS))
        recovered = []
        for row in rows:
            job = records.job_from_row(row)
            records.recover_job(job)
            row = records.job_row(job)
            recovered.append(row)
            self._index.put(row)
            if job.status in C.JOB_STATUS_FINALIZED:
                log.warning(
                    "Job %s was interrupted by a restart; finished as %s", job.id, job.status
                )
                continue
            self._jobs[job.id] = job
            # Log entries of opcodes that finished before the restart.
            self._logs[job.id] = [
                (op_idx, LogEntry(*entry)) for op_idx, entry in self._store.fetch_logs(job.id)
            ]
            heapq.heappush(self._ready, (job.priority, job.id))
        # Before masterd serves anyone: a synchronous write is fine here.
        self._store.write_batch(recovered, [])

    def start(self) -> None:
        """Start running jobs, once the filter rules are applied to those queued."""
        self._reject_matching(list(self._jobs.values()))
        self._schedule()

    async def shutdown(self, grace: float) -> None:
        """Stop taking jobs; give running ones ``grace`` seconds, then stop them."""
        self._accepting = False
        if self._retry is not None:
            self._retry.cancel()
        tasks = [job.task for job in self._jobs.values() if job.task is not None]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)
        await self.flush()

    async def flush(self) -> None:
        """Wait until every queued change is on disk, or the store fails."""
        while self._flush_task is not None:
            await asyncio.shield(self._flush_task)
        self._kick()
        if self._flush_task is not None:
            await asyncio.shield(self._flush_task)

    @property
    def unfinished_count(self) -> int:
        """Jobs not finished (those finished but not yet on disk do not count)."""
        return len(self._jobs) - len(self._finishing)


def _wanted_id(value: Any) -> int:
    """A job id from a filter: a number or a string of digits, as luxid reads it."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise errors.OpPrereqError(f"Invalid job id {value!r} in the query filter", C.ECODE_INVAL)


def _check_fields(fields: list[str]) -> None:
    unknown = [f for f in fields if f not in JOB_FIELDS.fields]
    if unknown:
        raise errors.OpPrereqError(
            f"Unknown output fields selected: {', '.join(unknown)}", C.ECODE_INVAL
        )


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


def _add_reason(ops: list[OpCode], job_id: int) -> None:
    """Record in each opcode's reason trail which job and index it became."""
    for index, op in enumerate(ops):
        source = f"gnt:opcode:{op.OP_ID[3:].lower()}"
        op.reason.append([source, f"job={job_id};index={index}", time.time_ns()])
