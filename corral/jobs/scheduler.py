"""Which queued job runs next: priorities, dependencies, filter rules, slots.

Up to ``max_running`` jobs run at once, by priority then id.  A job whose
dependencies are unfinished waits without taking a slot, and is looked at
again when the one it waits for leaves the queue.  A ``rate-limit:<n>:...``
reason (corral.jobs.reason_limits) and the job filter rules may hold a job
back (PAUSE, RATE_LIMIT) or reject it (REJECT) before it starts.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from corral import constants as C
from corral import errors
from corral.jobs import records
from corral.jobs.filters import JobFilters, reject
from corral.jobs.model import Job, QueuedOpCode, Unfinished
from corral.jobs.reason_limits import ReasonLimits
from corral.jobs.runner import OpExecutor, run_job
from corral.jobs.states import advance
from corral.objects.filter_rule import FilterRule
from corral.state.ports import JobStore

if TYPE_CHECKING:
    from corral.jobs.queue import JobQueue


class Scheduler:
    """The ready jobs and the running ones."""

    def __init__(
        self,
        queue: JobQueue,
        unfinished: Unfinished,
        store: JobStore,
        executor: OpExecutor,
        max_running: Callable[[], int],
        filter_rules: Iterable[FilterRule],
    ) -> None:
        self._queue = queue
        self._unfinished = unfinished
        self._store = store
        self._execute = executor
        self._max_running = max_running
        self._ready: list[tuple[int, int]] = []  # heap of (priority, job id)
        self._running: set[int] = set()
        self._dependents: dict[int, set[int]] = {}
        self._filters = JobFilters(filter_rules)
        self._held: set[int] = set()  # jobs a filter rule holds back
        self.accepting = True

    def push(self, job: Job) -> None:
        """``job`` is ready to be looked at (new, requeued, or re-prioritised)."""
        heapq.heappush(self._ready, (job.priority, job.id))

    def schedule(self) -> None:
        """Start ready jobs while slots are free."""
        jobs = self._unfinished.jobs
        limit = self._max_running()
        self._requeue_held()
        gate = self._filters.gate(jobs[job_id] for job_id in self._running)
        reason_limits = ReasonLimits(jobs[job_id] for job_id in self._running)
        while self._ready and len(self._running) < limit and self.accepting:
            priority, job_id = heapq.heappop(self._ready)
            job = jobs.get(job_id)
            if job is None or job.task is not None or job.status in C.JOB_STATUS_FINALIZED:
                continue
            if priority != job.priority:
                continue  # stale entry: a new priority pushed another one
            pending = self._unfinished_deps(job)
            if pending:
                self._park(job, pending)
                continue
            # As luxid: the reasons' rate limits first, then the filter rules.
            if not reason_limits.admit(job) or (gate is not None and not gate.admit(job)):
                self._held.add(job_id)
                continue
            self._running.add(job_id)
            job.task = asyncio.get_running_loop().create_task(self._run(job), name=f"job-{job_id}")

    def _requeue_held(self) -> None:
        """Jobs a filter rule held back are looked at again on every pass, as luxid
        filters its whole queue each time it schedules."""
        for job_id in self._held:
            job = self._unfinished.jobs.get(job_id)
            if job is not None:
                self.push(job)
        self._held.clear()

    def release_slot(self, job: Job) -> None:
        """``job``'s last opcode is done with its locks and only waits for
        files to be written: its slot goes to the next ready job."""
        if job.id in self._running:
            self._running.discard(job.id)
            if self.accepting:
                self.schedule()

    def reject_matching(self, jobs: Iterable[Job]) -> None:
        """Cancel the jobs not started yet that a REJECT filter rule applies to."""
        for job in jobs:
            rule = self._filters.rejecting(job) if job.task is None else None
            if rule is not None:
                reject(job, rule)
                self._queue.save(job)
                self._queue.finalize(job)

    def set_filter_rules(self, rules: Iterable[FilterRule]) -> None:
        self._filters = JobFilters(rules)

    def _park(self, job: Job, pending: set[int]) -> None:
        """Wait for dependencies without taking a running slot."""
        for dep in pending:
            self._dependents.setdefault(dep, set()).add(job.id)
        op = current_op(job)
        if op is not None and op.status == C.OP_STATUS_QUEUED:
            advance(op, C.OP_STATUS_WAITING)
            op.start_timestamp = time.time()
            self._queue.save(job)

    def _unfinished_deps(self, job: Job) -> set[int]:
        op = current_op(job)
        if op is None:
            return set()
        jobs = self._unfinished.jobs
        return {dep[0] for dep in op.input.depends or [] if dep[0] in jobs}

    async def _run(self, job: Job) -> None:
        try:
            await run_job(self._queue, job, self._execute, self._check_dependencies)
        except asyncio.CancelledError:
            if job.write_error is None:
                raise
        finally:
            self._running.discard(job.id)
            job.task = None
            if job.write_error is not None:
                records.fail_for_storage(job)
                self._queue.save(job)
            if job.status in C.JOB_STATUS_FINALIZED:
                self._queue.finalize(job)
            if self.accepting:
                self.schedule()

    async def _check_dependencies(self, job: Job, op: QueuedOpCode) -> None:
        """Wait for the opcode's dependencies; fail it if one ended wrongly."""
        jobs = self._unfinished.jobs
        for dep_id, allowed in op.input.depends or []:
            while dep_id in jobs:
                await jobs[dep_id].change_event().wait()
            rows = await self._store.fetch([dep_id], ["status"], archived=True)
            if not rows:
                raise errors.OpExecError(f"Dependency job {dep_id} not found")
            status = rows[0]["status"]
            if allowed and status not in allowed:
                raise errors.OpExecError(
                    f"Dependency job {dep_id} finished with status '{status}', not one of"
                    f" {', '.join(allowed)}"
                )

    def released(self, job: Job) -> None:
        """``job`` left the queue: wake the jobs that waited for it."""
        jobs = self._unfinished.jobs
        for waiter_id in self._dependents.pop(job.id, set()):
            waiter = jobs.get(waiter_id)
            if waiter is not None and waiter.task is None:
                self.push(waiter)

    def drop_unstarted(self, job: Job) -> None:
        """A task cancelled before its first step never runs its body (nor its
        clean-up), so it is dropped here."""
        if job.task is not None:
            job.task.cancel()
            job.task = None
        self._running.discard(job.id)

    async def stop(self, grace: float) -> None:
        """Take no more jobs; give running ones ``grace`` seconds, then stop them."""
        self.accepting = False
        tasks = [job.task for job in self._unfinished.jobs.values() if job.task is not None]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=5)


def current_op(job: Job) -> QueuedOpCode | None:
    """The job's first unfinished opcode."""
    return next((op for op in job.ops if not op.finished), None)
