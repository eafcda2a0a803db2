"""The list columns of every unarchived job, kept in memory.

``gnt-job list`` asks for id, status and summary of the whole queue.  Reading
and decoding 10,000 rows from SQLite each time costs more than the command's
whole budget, so the cheap columns live here too (a few hundred bytes a job),
updated on every write.  Archived jobs are not kept: they are read from the
store when asked for.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from corral.jobs.store import JobStore

LIST_COLUMNS = ("status", "priority", "summary", "received_ts", "start_ts", "end_ts")
_COVERED = frozenset(LIST_COLUMNS)


class ListIndex:
    """id → list columns of the jobs in the queue, in id order."""

    def __init__(self, store: JobStore) -> None:
        self._rows: dict[int, dict[str, Any]] = {
            row["id"]: row for row in store.fetch(None, LIST_COLUMNS)
        }

    @staticmethod
    def covers(needs: set[str]) -> bool:
        return needs <= _COVERED

    def put(self, row: dict[str, Any]) -> None:
        self._rows[row["id"]] = {
            "id": row["id"],
            **{name: row[name] for name in LIST_COLUMNS},
            "archived": 0,
        }

    def drop(self, job_ids: Iterable[int]) -> None:
        for job_id in job_ids:
            self._rows.pop(job_id, None)

    def rows(self, job_ids: list[int] | None) -> list[dict[str, Any]]:
        if job_ids is None:
            return list(self._rows.values())
        return [self._rows[i] for i in sorted(set(job_ids)) if i in self._rows]
