"""Reading the job queue: Query("job"), QueryJobs and WaitForJobChange.

Unfinished jobs are answered from memory, the list columns of the whole
queue from the in-memory index, and the rest from the store, each row as in
memory when the store has not caught up with it yet.  A waiter sleeps on its
job's own change event: a change wakes exactly the waiters of that job.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from corral import constants as C
from corral import errors
from corral.gcpause import gc_paused
from corral.jobs import records
from corral.jobs.fields import JOB_FIELDS
from corral.jobs.journal import Journal
from corral.jobs.listindex import DEFAULT_FIELDS, ListIndex
from corral.jobs.model import Job, Unfinished
from corral.luxi import protocol
from corral.luxi.protocol import Encoded
from corral.query.fields import UNAVAIL, cell, plain
from corral.query.filter import filter_fields, requested_names, simple_filter


class JobQueries:
    """The queue's read side."""

    def __init__(self, unfinished: Unfinished, index: ListIndex, journal: Journal) -> None:
        self._unfinished = unfinished
        self._index = index
        self._journal = journal

    async def query(self, fields: list[str], qfilter: Any, archived: bool = False) -> Any:
        """Query("job"); the whole queue's default listing comes pre-encoded."""
        if tuple(fields) == DEFAULT_FIELDS and qfilter is None and not archived:
            definitions = protocol.dumps(JOB_FIELDS.definitions(fields)).decode()
            return Encoded(f'{{"fields":{definitions},"data":{self._index.listing()}}}')
        return await self._query(fields, qfilter, archived)

    async def _query(self, fields: list[str], qfilter: Any, archived: bool) -> dict[str, Any]:
        wanted = requested_names(qfilter, "id")
        if wanted is not None:
            return await self._query_wanted(fields, wanted)
        # As in Ganeti, asking for the "archived" field looks in the archive too.
        archived = archived or "archived" in fields
        rows = await self._records(None, fields, qfilter, archived)
        with gc_paused():
            return JOB_FIELDS.query(fields, qfilter, rows)

    async def _query_wanted(self, fields: list[str], wanted: list[Any]) -> dict[str, Any]:
        """Jobs asked for by id, as luxid answers: archived ones too, and a row
        for each id, with only the id known for a job that does not exist."""
        ids = list(dict.fromkeys(_wanted_id(value) for value in wanted))  # once each, as luxid
        found = {r["id"]: r for r in await self._records(ids, fields, None, archived=True)}
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

    async def query_jobs(self, job_ids: list[int] | None, fields: list[str]) -> list[Any]:
        """QueryJobs: luxid's classic query, a row of plain values per job (for an
        unknown job, nothing but its id)."""
        check_fields(fields)
        result = await self._query(fields, simple_filter("id", job_ids or []), False)
        return [[value for _status, value in row] for row in result["data"]]

    async def _records(
        self, job_ids: list[int] | None, fields: list[str], qfilter: Any, archived: bool
    ) -> list[dict[str, Any]]:
        needs = JOB_FIELDS.needs(fields) | JOB_FIELDS.needs(filter_fields(qfilter))
        if not archived and self._index.covers(needs):
            return self._index.rows(job_ids)
        # Taken before the store is read: while it reads, a job's write may
        # land and the job leave memory, and its row read may be the older one.
        newer = self._not_on_disk()
        store = self._journal.store
        columns = [c for c in records.ROW_COLUMNS if c in needs]
        rows = await store.fetch(job_ids, columns, archived)
        if "logs" in needs:
            for row in rows:
                row["logs"] = await store.fetch_logs(row["id"], archived=bool(row["archived"]))
        return [newer.get(row["id"], row) for row in rows]

    def _not_on_disk(self) -> dict[int, dict[str, Any]]:
        """The records, as in memory, of the jobs the store has not caught up with."""
        if not self._journal.behind:
            return {}
        logs = self._unfinished.logs
        return {
            job_id: records.job_record(job, logs.get(job_id, []))
            for job_id, job in self._unfinished.jobs.items()
            if self._journal.pending(job_id)
        }

    async def wait_for_change(
        self,
        job_id: int,
        fields: list[str],
        prev_info: Any,
        prev_serial: int | None,
        timeout: float,
    ) -> Any:
        """Return ``[job_info, new_log_entries]`` once either differs, or "nochange"."""
        check_fields(fields)
        deadline = time.monotonic() + min(max(timeout, 0.0), C.LUXI_WFJC_TIMEOUT)
        prev_serial = prev_serial or 0
        while True:
            job = self._unfinished.jobs.get(job_id)
            if job is None:
                return await self._finished_change(job_id, fields, prev_serial)
            info = self._memory_info(job, fields)
            logs = self._unfinished.logs.get(job_id, [])
            entries = [e.to_wire() for _, e in logs if e.serial > prev_serial]
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
        record = records.job_record(job, self._unfinished.logs.get(job.id, []))
        return [plain(JOB_FIELDS.fields[f].getter(record)) for f in fields]

    async def _finished_change(self, job_id: int, fields: list[str], prev_serial: int) -> Any:
        store = self._journal.store
        rows_all = await store.fetch([job_id], [], archived=True)
        if not rows_all:
            raise errors.JobLost(f"Job {job_id} not found")
        rows = await self.query_jobs([job_id], fields)
        archived = bool(rows_all[0]["archived"])
        entries = [
            [e[0], records.split_time(e[1]), e[2], e[3]]
            for _, e in await store.fetch_logs(job_id, prev_serial, archived=archived)
        ]
        return [rows[0], entries]


def _wanted_id(value: Any) -> int:
    """A job id from a filter: a number or a string of digits, as luxid reads it."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise errors.OpPrereqError(f"Invalid job id {value!r} in the query filter", C.ECODE_INVAL)


def check_fields(fields: list[str]) -> None:
    unknown = [f for f in fields if f not in JOB_FIELDS.fields]
    if unknown:
        raise errors.OpPrereqError(
            f"Unknown output fields selected: {', '.join(unknown)}", C.ECODE_INVAL
        )
