"""The job queue's journal: every change of a job, on its way to the store.

A change is queued here and written in groups: one batch per turn of the
event loop, committed (one fsync) by the store, off the event loop.  A
submission is committed before it is answered.  A finished job leaves
memory only once its final state is on disk (``released``).

When the store cannot be written (full disk, I/O error, read-only file
system, a newer master's fence) the changes stay queued and are retried on
the next change and every ``WRITE_RETRY`` seconds; every job whose state
could not be written is handed to ``failed`` (it then ends in ``error``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from corral import errors
from corral.jobs.listindex import ListIndex
from corral.state.ports import JobStore, LogRow

log = logging.getLogger(__name__)

# Seconds between attempts to write changes the store refused (full disk...).
WRITE_RETRY = 1.0


class Journal:
    """Queued changes of jobs and their group commit."""

    def __init__(
        self,
        store: JobStore,
        index: ListIndex,
        fence: Callable[[], int],
        failed: Callable[[errors.JobQueueError, list[int]], None],
        released: Callable[[list[int]], None],
    ) -> None:
        self.store = store
        self._index = index
        self._fence = fence
        self._failed = failed
        self._released = released
        self._dirty: dict[int, dict[str, Any]] = {}
        self._dirty_logs: list[LogRow] = []
        self._inflight: dict[int, dict[str, Any]] = {}  # the batch being committed
        self._finishing: set[int] = set()  # finished in memory, final state not on disk
        self._flush_task: asyncio.Task[None] | None = None
        self._retry: asyncio.TimerHandle | None = None
        # Jobs someone waits to see on disk (see durable).
        self._waiters: dict[int, list[asyncio.Future[None]]] = {}
        self.write_error: errors.JobQueueError | None = None

    async def insert(
        self, count: int, build: Callable[[list[int]], list[dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        """New jobs, committed at once (a submission is answered only after)."""
        started = time.monotonic()
        rows = await self.store.insert_new(count, build, self._fence())
        self._timed(started)
        for row in rows:
            self._index.put(row)
        return rows

    def save(self, row: dict[str, Any]) -> None:
        """Queue a job's new state."""
        self._dirty[row["id"]] = row
        self._index.put(row)
        self.kick()

    def log(self, entry: LogRow) -> None:
        """Queue a new log entry (its job's state is saved with it)."""
        self._dirty_logs.append(entry)

    def finishing(self, job_id: int) -> None:
        """The job is finished: release it once its final state is on disk."""
        self._finishing.add(job_id)
        self.kick()

    @property
    def unreleased(self) -> int:
        """Finished jobs still waiting for their final state to be on disk."""
        return len(self._finishing)

    async def durable(self, job_id: int) -> None:
        """Until the job's state queued so far is in the store; the store's
        JobQueueError if it cannot be written."""
        if not self.pending(job_id):
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(job_id, []).append(waiter)
        self.kick()
        await waiter

    def _wake(self, job_ids: Iterable[int], err: errors.JobQueueError | None = None) -> None:
        """Answer the waiters of these jobs (see durable)."""
        for job_id in job_ids:
            if err is None and self.pending(job_id):
                continue  # a newer state is queued: it is waited for too
            for waiter in self._waiters.pop(job_id, []):
                if waiter.done():
                    continue
                if err is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(err)

    def pending(self, job_id: int) -> bool:
        """Whether the store may not hold the job's latest state yet."""
        return job_id in self._dirty or job_id in self._inflight

    @property
    def behind(self) -> bool:
        """Whether any change is not on disk yet."""
        return bool(self._dirty or self._inflight)

    def kick(self) -> None:
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
                started = time.monotonic()
                try:
                    await self.store.write_batch(list(rows.values()), logs, self._fence())
                except errors.JobQueueError as err:  # the store cannot be written
                    self._inflight = {}
                    # Keep the batch (newer changes of a job win) and retry later.
                    self._dirty = rows | self._dirty
                    self._dirty_logs = logs + self._dirty_logs
                    self._write_failed(err)
                    return
                self._inflight = {}
                self._timed(started)
                self._wake(rows)
                if self.write_error is not None:
                    log.warning("The job queue can be written again")
                    self.write_error = None
        finally:
            self._flush_task = None

    def _timed(self, started: float) -> None:
        """A commit that started at ``started`` (monotonic) succeeded."""
        self._index.stats.commits.observe(time.monotonic() - started, "jobs")

    def _release_durable(self) -> None:
        done = [job_id for job_id in self._finishing if job_id not in self._dirty]
        self._finishing.difference_update(done)
        if done:
            self._released(done)

    def _write_failed(self, err: errors.JobQueueError) -> None:
        if self.write_error is None:
            log.error("%s", err.message)
        self.write_error = err
        self._wake(list(self._waiters), err)
        if self._retry is None or self._retry.cancelled():
            self._retry = asyncio.get_running_loop().call_later(WRITE_RETRY, self._retry_write)
        self._failed(err, list(self._dirty))

    def _retry_write(self) -> None:
        self._retry = None
        self.kick()

    async def flush(self) -> None:
        """Wait until every queued change is on disk, or the store fails."""
        while self._flush_task is not None:
            await asyncio.shield(self._flush_task)
        self.kick()
        if self._flush_task is not None:
            await asyncio.shield(self._flush_task)

    async def archive(self, job_ids: Sequence[int]) -> int:
        """Move finished jobs to the archive (after what is queued is on disk)."""
        moved = await self.store.archive(job_ids, self._fence())
        self._index.drop(job_ids)
        return moved

    def stop_retrying(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
