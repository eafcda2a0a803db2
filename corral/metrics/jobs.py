"""The job queue's numbers, kept as jobs change (see ``corral.jobs.listindex``).

The list index holds every unarchived job's status and summary and sees
every change of them: it hands each change here, so counting the jobs by
status and operation costs a dict update per change, never a scan of the
queue.  A job's operation is its opcodes' OP_IDs (``OP_`` and the summary's
name, as luxid's summary is built), joined by commas when it has several.
"""

from __future__ import annotations

import time
from typing import Any

from corral import constants as C
from corral.metrics.registry import DURATION_BUCKETS, LATENCY_BUCKETS, Gauge, Histogram, Metric

# The index's row: status, priority, summary, received_ts, start_ts, end_ts, ...
_STATUS, _SUMMARY, _RECEIVED, _END = 0, 2, 3, 5


def operation(summary: list[str]) -> str:
    """The OP_IDs of a job's summary (``["TEST_DELAY(0)"]`` → ``OP_TEST_DELAY``)."""
    return ",".join("OP_" + item.partition("(")[0] for item in summary)


class JobStats:
    """Unarchived jobs by operation and status, the durations of the jobs
    that finished while this masterd ran, and the stores' commit times (the
    job store's journal and the config manager time theirs here)."""

    def __init__(self) -> None:
        self.jobs = Gauge(
            "corral_jobs",
            "Unarchived jobs by operation (their opcodes' OP_IDs) and status",
            ("op_id", "status"),
        )
        self.durations = Histogram(
            "corral_job_duration_seconds",
            "Time from a job's submission to its end, for jobs that ended while this"
            " master daemon ran, by operation",
            ("op_id",),
            DURATION_BUCKETS,
        )
        self.commits = Histogram(
            "corral_store_commit_seconds",
            "Time of a commit to a store (config: a group of configuration changes;"
            " jobs: new jobs or a batch of job changes), as masterd waits for it",
            ("store",),
            LATENCY_BUCKETS,
        )
        self._by_status: dict[str, int] = {}

    def changed(self, old: tuple[Any, ...] | None, new: tuple[Any, ...]) -> None:
        """A job's index row went from ``old`` (None: new to the index) to ``new``."""
        status = new[_STATUS]
        if old is not None and old[_STATUS] == status:
            return  # a log entry, a priority: nothing counted changed
        op_id = operation(new[_SUMMARY])
        if old is not None:
            self._count(op_id, old[_STATUS], -1)
            if old[_STATUS] not in C.JOB_STATUS_FINALIZED and status in C.JOB_STATUS_FINALIZED:
                end = new[_END] if new[_END] is not None else time.time()
                self.durations.observe(max(end - new[_RECEIVED], 0.0), op_id)
        self._count(op_id, status, 1)

    def dropped(self, old: tuple[Any, ...]) -> None:
        """A job left the index (archived)."""
        self._count(operation(old[_SUMMARY]), old[_STATUS], -1)

    def _count(self, op_id: str, status: str, delta: int) -> None:
        key = (op_id, status)
        value = self.jobs.values.get(key, 0) + delta
        if value:
            self.jobs.values[key] = value
        else:
            del self.jobs.values[key]
        self._by_status[status] = self._by_status.get(status, 0) + delta

    def by_status(self, status: str) -> int:
        """How many unarchived jobs have ``status``."""
        return self._by_status.get(status, 0)

    def metrics(self) -> list[Metric]:
        """The job metrics (the queue depth among them)."""
        depth = Gauge(
            "corral_job_queue_depth",
            "Jobs waiting to run: queued and waiting (for locks or dependencies)",
        )
        depth.set(self.by_status(C.JOB_STATUS_QUEUED) + self.by_status(C.JOB_STATUS_WAITING))
        by_status = Gauge("corral_jobs_by_status", "Unarchived jobs by status", ("status",))
        for status in C.JOB_STATUS_ALL:
            by_status.set(self.by_status(status), status)
        return [self.jobs, by_status, depth, self.durations, self.commits]
