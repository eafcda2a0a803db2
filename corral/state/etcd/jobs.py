"""Jobs in etcd: one key per job (queued or archived) and per log entry.

A submission is acknowledged once its transaction committed: the new ids
(compared with the last one given out) and the jobs' rows, in one
transaction when they fit etcd's request limits (else the rows that do not
fit follow, each batch fenced).  State changes are group-committed: a batch
of the queue's journal goes in as few transactions as etcd's limits allow.
Every write compares the fence (see ``keyspace``).

Sizes are bounded: a text longer than ``MAX_TEXT`` in a job (opcode results,
script output) or a log message is cut, saying how much was cut, so that a
job's row and a log entry always fit in a request.  Log entries stay under
their job's id when it is archived (the job's key says where it is).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from corral import errors
from corral.state import schema
from corral.state.etcd import client as etcd
from corral.state.etcd import schema as etcd_schema
from corral.state.etcd.client import EtcdClient, EtcdError, KeyValue
from corral.state.etcd.keyspace import Keyspace, TooLarge, batches, encode, pad
from corral.state.ports import FencedOut, LogEntryRow, LogRow

_WHAT = "the job queue"
# Characters a text in a job or a log entry keeps; beyond, it is cut.
MAX_TEXT = 64 * 1024
_FINISHED = frozenset({"success", "error", "canceled"})
_UNFINISHED = frozenset({"queued", "waiting", "running", "canceling"})
# Attempts at giving out ids that lost a race with another writer.
_RACES = 5
# Reads of single keys per transaction.
_GETS_PER_TXN = etcd.MAX_TXN_OPS


def clip(value: Any, limit: int = MAX_TEXT) -> Any:
    """``value`` with every text longer than ``limit`` characters cut."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        return value[:limit] + f"... [{len(value) - limit} more characters cut]"
    if isinstance(value, list):
        return [clip(item, limit) for item in value]
    if isinstance(value, dict):
        return {key: clip(item, limit) for key, item in value.items()}
    return value


def _bounded(value: Any) -> bytes:
    """``value`` as stored: JSON, its long texts cut if it is large."""
    data = encode(value)
    return data if len(data) <= MAX_TEXT else encode(clip(value))


class EtcdJobStore:
    """The job store of a cluster with master candidates (see ports.JobStore)."""

    def __init__(self, client: EtcdClient, prefix: str) -> None:
        # One submission at a time gives out ids: concurrent ones would race
        # for them and try again (only another master's writes should).
        self._giving_ids = asyncio.Lock()
        self._space = Keyspace(client, prefix)
        self._client = client
        self._last = prefix + "jobs/last"
        self._queued = prefix + "jobs/queued/"
        self._archived = prefix + "jobs/archived/"
        self._logs = prefix + "jobs/log/"

    # Writes
    async def insert_new(
        self, count: int, build: Callable[[list[int]], list[dict[str, Any]]], fence: int
    ) -> list[dict[str, Any]]:
        try:
            async with self._giving_ids:
                return await self._insert_new(count, build, fence)
        except (EtcdError, FencedOut, TooLarge) as err:
            raise errors.JobQueueError(err.message) from err

    async def _insert_new(
        self, count: int, build: Callable[[list[int]], list[dict[str, Any]]], fence: int
    ) -> list[dict[str, Any]]:
        for _ in range(_RACES):
            kvs, _, _ = await self._client.range(self._last)
            last = int(json.loads(kvs[0].value)["id"]) if kvs else 0
            rows = build(list(range(last + 1, last + count + 1)))
            puts = [[etcd.put(self._job_key(self._queued, r["id"]), _bounded(r))] for r in rows]
            groups = list(batches([[], *puts]))  # the first carries the new last id
            nonce = uuid.uuid4().hex
            first = [op for i in groups[0][1:] for op in puts[i - 1]]
            result = await self._space.write(
                fence,
                _WHAT,
                [etcd.compare(self._last, "MOD", "EQUAL", kvs[0].mod_revision if kvs else 0)],
                [etcd.put(self._last, encode({"id": last + count, "writer": nonce})), *first],
                [etcd.get(self._last)],
            )
            found = result.kvs(0) if not result.succeeded else []
            if result.succeeded or (found and json.loads(found[0].value)["writer"] == nonce):
                break
            # Another writer gave out ids meanwhile (a deposed master would be
            # fenced out): read the last id again.
        else:
            raise errors.JobQueueError("Other writers kept giving out job ids; try again")
        for group in groups[1:]:
            await self._space.write(fence, _WHAT, [], [puts[i - 1][0] for i in group])
        return rows

    async def write_batch(
        self, rows: Sequence[dict[str, Any]], logs: Sequence[LogRow], fence: int
    ) -> None:
        ops = [[etcd.put(self._log_key(log[0], log[2]), _log_value(log))] for log in logs]
        ops += [[etcd.put(self._job_key(self._queued, r["id"]), _bounded(r))] for r in rows]
        try:
            for group in batches(ops):
                await self._space.write(fence, _WHAT, [], [ops[i][0] for i in group])
        except (EtcdError, FencedOut, TooLarge) as err:
            raise errors.JobQueueError(err.message) from err

    async def archive(self, job_ids: Sequence[int], fence: int) -> int:
        try:
            found = await self._get_many(self._queued, job_ids)
            moves = [
                (
                    kv,
                    [
                        etcd.put(self._archived + kv.key[len(self._queued) :], kv.value),
                        etcd.delete(kv.key),
                    ],
                )
                for kv in found
                if json.loads(kv.value)["status"] in _FINISHED
            ]
            moved = 0
            for group in batches([ops for _, ops in moves]):
                chunk = [moves[i] for i in group]
                # Only jobs that did not change since read (their last state is kept).
                result = await self._space.write(
                    fence,
                    _WHAT,
                    [etcd.compare(kv.key, "MOD", "EQUAL", kv.mod_revision) for kv, _ in chunk],
                    [op for _, ops in chunk for op in ops],
                )
                moved += len(chunk) if result.succeeded else 0
            return moved
        except (EtcdError, FencedOut, TooLarge) as err:
            raise errors.JobQueueError(err.message) from err

    async def copy_in(
        self, rows: Sequence[dict[str, Any]], logs: Sequence[LogRow], last_id: int, fence: int
    ) -> None:
        """Store jobs read from another store as they are: ``rows`` (with their
        ``archived`` flag) and their ``logs``, and ``last_id`` as the last id
        given out."""
        ops = [[etcd.put(self._log_key(log[0], log[2]), _log_value(log))] for log in logs]
        for row in rows:
            place = self._archived if row["archived"] else self._queued
            job = {k: v for k, v in row.items() if k != "archived"}
            ops.append([etcd.put(self._job_key(place, row["id"]), _bounded(job))])
        ops.append([etcd.put(self._last, encode({"id": last_id, "writer": "copy"}))])
        ops.append([etcd_schema.stamp(self._space.prefix, schema.JOBS)])
        try:
            for group in batches(ops):
                await self._space.write(fence, _WHAT, [], [ops[i][0] for i in group])
        except (EtcdError, FencedOut, TooLarge) as err:
            raise errors.JobQueueError(err.message) from err

    # Reads
    async def last_id(self) -> int:
        kvs, _, _ = await self._client.range(self._last)
        return int(json.loads(kvs[0].value)["id"]) if kvs else 0

    async def fetch(
        self, job_ids: Sequence[int] | None, columns: Sequence[str], archived: bool = False
    ) -> list[dict[str, Any]]:
        places = [(self._queued, 0), (self._archived, 1)] if archived else [(self._queued, 0)]
        records = []
        for prefix, flag in places:
            if job_ids is None:
                kvs, _ = await self._client.scan(prefix)
            else:
                kvs = await self._get_many(prefix, job_ids)
            for kv in kvs:
                row = json.loads(kv.value)
                record = {"id": row["id"], **{c: row[c] for c in columns}, "archived": flag}
                records.append(record)
        records.sort(key=lambda r: int(r["id"]))
        return records

    async def fetch_logs(
        self, job_id: int, after: int = 0, archived: bool = False
    ) -> list[LogEntryRow]:
        job = self._job_key(self._archived if archived else self._queued, job_id)
        prefix = f"{self._logs}{pad(job_id)}/"
        read = await self._space.read(
            etcd.get(job), etcd.get_range(prefix + pad(after + 1), prefix)
        )
        if not read.kvs(0):
            return []
        return [(entry[0], entry[1:]) for entry in (json.loads(kv.value) for kv in read.kvs(1))]

    async def unfinished_ids(self) -> list[int]:
        return [row["id"] for row in await self._rows() if row["status"] in _UNFINISHED]

    async def finished_before(self, timestamp: float | None) -> list[int]:
        return [
            row["id"]
            for row in await self._rows()
            if row["status"] in _FINISHED and (timestamp is None or row["end_ts"] < timestamp)
        ]

    async def close(self) -> None:
        """The client is the caller's: it stays open."""

    async def _rows(self) -> list[dict[str, Any]]:
        kvs, _ = await self._client.scan(self._queued)
        return [json.loads(kv.value) for kv in kvs]

    async def _get_many(self, prefix: str, job_ids: Sequence[int]) -> list[KeyValue]:
        found: list[KeyValue] = []
        ids = sorted(set(job_ids))
        for start in range(0, len(ids), _GETS_PER_TXN):
            chunk = ids[start : start + _GETS_PER_TXN]
            read = await self._space.read(*(etcd.get(self._job_key(prefix, i)) for i in chunk))
            for index in range(len(chunk)):
                found += read.kvs(index)
        return found

    def _job_key(self, prefix: str, job_id: int) -> str:
        return prefix + pad(job_id)

    def _log_key(self, job_id: int, serial: int) -> str:
        return f"{self._logs}{pad(job_id)}/{pad(serial)}"


def _log_value(log: LogRow) -> bytes:
    """A log entry as stored: ``[op index, serial, timestamp, type, message]``."""
    _, op_idx, serial, ts, kind, message = log
    return _bounded([op_idx, serial, ts, kind, message])
