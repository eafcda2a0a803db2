"""The list columns of every unarchived job, kept in memory.

``gnt-job list`` asks for id, status and summary of the whole queue.  Reading
and decoding 10,000 rows from SQLite, then building and encoding the answer
cell by cell, costs more than the command's whole budget.  So the cheap
columns live here too, updated on every write, together with each job's
answer row for exactly those default fields, already encoded: listing the
queue is then one string join.  Archived jobs are not kept: they are read
from the store when asked for.  Every change of a job's row is handed to
its :class:`~corral.metrics.jobs.JobStats` (the metrics' job counts).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from corral import constants as C
from corral.metrics.jobs import JobStats

LIST_COLUMNS = ("status", "priority", "summary", "received_ts", "start_ts", "end_ts")
# gnt-job list's default fields, whose answer rows are kept encoded.
DEFAULT_FIELDS = ("id", "status", "summary")
_COVERED = frozenset(LIST_COLUMNS)
_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False).encode


def _listing(job_id: int, status: str, summary: list[str]) -> str:
    normal = C.RS_NORMAL
    return _encode([[normal, job_id], [normal, status], [normal, summary]])


class ListIndex:
    """id → list columns of the jobs in the queue, in id order."""

    def __init__(self) -> None:
        self._rows: dict[int, tuple[Any, ...]] = {}
        self.stats = JobStats()

    @staticmethod
    def covers(needs: set[str]) -> bool:
        return needs <= _COVERED

    def put(self, row: dict[str, Any]) -> None:
        values = tuple(row[name] for name in LIST_COLUMNS)
        job_id = row["id"]
        self.stats.changed(self._rows.get(job_id), values)
        self._rows[job_id] = (*values, _listing(job_id, row["status"], row["summary"]))

    def drop(self, job_ids: Iterable[int]) -> None:
        for job_id in job_ids:
            old = self._rows.pop(job_id, None)
            if old is not None:
                self.stats.dropped(old)

    def rows(self, job_ids: list[int] | None) -> list[dict[str, Any]]:
        """Query records (as the store's rows) of all or some jobs, by id."""
        ids = self._rows if job_ids is None else sorted(set(job_ids) & self._rows.keys())
        return [
            {
                "id": job_id,
                **dict(zip(LIST_COLUMNS, self._rows[job_id], strict=False)),
                "archived": 0,
            }
            for job_id in ids
        ]

    def listing(self) -> str:
        """The encoded rows of the default fields for every job, as a JSON array."""
        return "[" + ",".join(row[-1] for row in self._rows.values()) + "]"
