"""Jobs on disk: one SQLite file (WAL) holding the queue and the archive.

Durability: ``synchronous=FULL``, so every commit is on disk (the WAL is
fsynced) before it returns, and a change acknowledged to a client survives a
power loss.  To keep that cheap, the queue commits its jobs' changes in groups
(one transaction, one fsync, per batch: see ``corral.jobs.journal``).  Writes
run in one thread on a connection of their own, reads in another thread on
another connection, which in WAL mode sees every committed batch and never
waits for a writer: the event loop waits for neither.

A storage failure (full disk, I/O error, read-only file system) raises
``errors.JobQueueError`` naming the cause and the file; the transaction is then rolled
back unless SQLite already did so itself.  Secret opcode values never get
here: the caller hands over opcodes already stripped of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from corral import errors, sqlite_faults
from corral.state import schema
from corral.state.ports import FencedOut, LogEntryRow, LogRow
from corral.state.sqlite.fencing import check_fence
from corral.state.sqlite.worker import Worker

_JOB_COLUMNS = (
    "id INTEGER PRIMARY KEY, status TEXT NOT NULL, priority INTEGER NOT NULL,"
    " summary TEXT NOT NULL, received_ts REAL, start_ts REAL, end_ts REAL,"
    " ops TEXT NOT NULL, log_serial INTEGER NOT NULL"
)
_LOG_COLUMNS = (
    "job_id INTEGER NOT NULL, op_idx INTEGER NOT NULL, serial INTEGER NOT NULL,"
    " ts REAL NOT NULL, type TEXT NOT NULL, message TEXT NOT NULL,"
    " PRIMARY KEY (job_id, serial)"
)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS jobs ({_JOB_COLUMNS})",
    f"CREATE TABLE IF NOT EXISTS archived_jobs ({_JOB_COLUMNS})",
    f"CREATE TABLE IF NOT EXISTS joblog ({_LOG_COLUMNS}) WITHOUT ROWID",
    f"CREATE TABLE IF NOT EXISTS archived_joblog ({_LOG_COLUMNS}) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status)",
)
_JSON_COLUMNS = frozenset({"summary", "ops"})
_UPDATE_JOB = (
    "UPDATE jobs SET status = ?, priority = ?, start_ts = ?, end_ts = ?, ops = ?,"
    " log_serial = ? WHERE id = ?"
)

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode

# Page cache of the writing connection (the reading one keeps SQLite's default, 2 MiB).
WRITER_CACHE_KIB = 256


class _JobsFile:
    """The SQLite file of the jobs: blocking calls, each in its worker thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        opened: list[sqlite3.Connection] = []
        schema.upgrade_files([(path, schema.JOBS)])
        # Private from the start (SQLite gives the -wal and -shm files the same
        # mode): jobs carry private parameters.
        with contextlib.suppress(OSError):  # any other failure shows in SQLite's open
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        try:
            self._wdb = self._connect(opened)
            # The writer appends and archives: it needs little page cache, and
            # every page it keeps is memory masterd holds for nothing.
            self._wdb.execute(f"PRAGMA cache_size=-{WRITER_CACHE_KIB}")
            for stmt in _SCHEMA:
                self._wdb.execute(stmt)
            schema.stamp_new(self._wdb, schema.JOBS)
            self._db = self._connect(opened)
        except sqlite3.Error as err:
            for db in opened:
                db.close()
            message = sqlite_faults.describe(err, "the job queue", path)
            if message is not None:
                raise errors.JobQueueError(message) from err
            raise

    def _connect(self, opened: list[sqlite3.Connection]) -> sqlite3.Connection:
        db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        opened.append(db)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA busy_timeout=5000")
        return db

    def close_reader(self) -> None:
        self._db.close()

    def close_writer(self) -> None:
        self._wdb.close()

    # Writes
    def _write(self, body: Callable[[sqlite3.Connection], Any], fence: int) -> Any:
        """Run ``body`` in one write transaction; storage faults (and a newer
        master's writes) become ``JobQueueError``."""
        db = self._wdb
        try:
            db.execute("BEGIN IMMEDIATE")
            check_fence(db, fence, "the job queue")
            result = body(db)
            db.execute("COMMIT")
        except FencedOut as err:
            sqlite_faults.rollback(db)
            raise errors.JobQueueError(err.message) from err
        except BaseException as err:
            sqlite_faults.rollback(db)
            message = sqlite_faults.describe(err, "the job queue", self.path)
            if message is not None:
                raise errors.JobQueueError(message) from err
            raise
        return result

    def insert_new(
        self, count: int, build: Callable[[list[int]], list[dict[str, Any]]], fence: int
    ) -> list[dict[str, Any]]:
        """Reserve ``count`` job ids, store the rows ``build(ids)`` makes of them, commit."""

        def body(db: sqlite3.Connection) -> list[dict[str, Any]]:
            row = db.execute("SELECT value FROM meta WHERE key = 'serial'").fetchone()
            last = row[0] if row else 0
            db.execute("INSERT OR REPLACE INTO meta VALUES ('serial', ?)", (last + count,))
            rows = build(list(range(last + 1, last + count + 1)))
            db.executemany(
                "INSERT INTO jobs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (_job_values(r) for r in rows),
            )
            return rows

        rows: list[dict[str, Any]] = self._write(body, fence)
        return rows

    def write_batch(
        self, rows: Sequence[dict[str, Any]], logs: Sequence[LogRow], fence: int
    ) -> None:
        """Commit changed jobs and new log entries in one transaction (one fsync)."""

        def body(db: sqlite3.Connection) -> None:
            db.executemany(
                "INSERT INTO joblog VALUES (?, ?, ?, ?, ?, ?)",
                ((*log[:5], _dumps(log[5])) for log in logs),
            )
            db.executemany(_UPDATE_JOB, (_update_values(row) for row in rows))

        self._write(body, fence)

    def archive(self, job_ids: Sequence[int], fence: int) -> int:
        """Move finished jobs to the archive; returns how many moved."""
        if not job_ids:
            return 0

        def body(db: sqlite3.Connection) -> int:
            moved = 0
            for chunk in _chunks(job_ids, 500):
                marks = ",".join("?" * len(chunk))
                # Only finished jobs: the store, not memory, says what is finished.
                where = f"id IN ({marks}) AND status IN ('success', 'error', 'canceled')"
                db.execute(f"INSERT INTO archived_jobs SELECT * FROM jobs WHERE {where}", chunk)
                db.execute(
                    "INSERT INTO archived_joblog SELECT * FROM joblog WHERE job_id IN"
                    f" (SELECT id FROM jobs WHERE {where})",
                    chunk,
                )
                db.execute(
                    f"DELETE FROM joblog WHERE job_id IN (SELECT id FROM jobs WHERE {where})",
                    chunk,
                )
                moved += db.execute(f"DELETE FROM jobs WHERE {where}", chunk).rowcount
            return moved

        moved: int = self._write(body, fence)
        return moved

    # Reads
    def last_id(self) -> int:
        """The highest job id allocated so far (0 before the first job)."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'serial'").fetchone()
        return int(row[0]) if row else 0

    def fetch(
        self, job_ids: Sequence[int] | None, columns: Sequence[str], archived: bool = False
    ) -> list[dict[str, Any]]:
        """Rows with the given columns (plus ``id``), by id, optionally with the archive."""
        cols = ", ".join(("id", *columns))
        tables = [("jobs", 0), ("archived_jobs", 1)] if archived else [("jobs", 0)]
        rows: list[tuple[Any, ...]] = []
        for table, flag in tables:
            select = f"SELECT {cols}, {flag} FROM {table}"
            if job_ids is None:
                rows.extend(self._db.execute(select + " ORDER BY id"))
            else:
                for chunk in _chunks(job_ids, 500):
                    marks = ",".join("?" * len(chunk))
                    rows.extend(
                        self._db.execute(f"{select} WHERE id IN ({marks}) ORDER BY id", chunk)
                    )
        if archived:
            rows.sort(key=lambda r: r[0])
        names = ("id", *columns, "archived")
        # Rows have exactly these columns; zip() without the strict keyword is
        # a third cheaper per row, which shows with 10,000 rows.
        records = [dict(zip(names, row)) for row in rows]  # noqa: B905
        for index, name in enumerate(names):
            if name in _JSON_COLUMNS:
                values = _loads_many([row[index] for row in rows])
                for record, value in zip(records, values, strict=True):
                    record[name] = value
        return records

    def fetch_logs(
        self, job_id: int, after_serial: int = 0, archived: bool = False
    ) -> list[LogEntryRow]:
        """``(op_idx, [serial, ts, type, message])`` for one job, oldest first."""
        out = []
        for table in ("archived_joblog",) if archived else ("joblog",):
            for op_idx, serial, ts, kind, message in self._db.execute(
                f"SELECT op_idx, serial, ts, type, message FROM {table}"
                " WHERE job_id = ? AND serial > ? ORDER BY serial",
                (job_id, after_serial),
            ):
                out.append((op_idx, [serial, ts, kind, json.loads(message)]))
        return out

    def unfinished_ids(self) -> list[int]:
        return [
            r[0]
            for r in self._db.execute(
                "SELECT id FROM jobs WHERE status IN ('queued', 'waiting', 'running', 'canceling')"
                " ORDER BY id"
            )
        ]

    def finished_before(self, timestamp: float | None) -> list[int]:
        """Ids of finished, unarchived jobs that ended before ``timestamp`` (None: all)."""
        sql = "SELECT id FROM jobs WHERE status IN ('success', 'error', 'canceled')"
        if timestamp is None:
            return [r[0] for r in self._db.execute(sql + " ORDER BY id")]
        return [r[0] for r in self._db.execute(sql + " AND end_ts < ? ORDER BY id", (timestamp,))]


class SqliteJobStore:
    """The job store of a cluster without master candidates (see ports.JobStore)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer = Worker("job-store-write")
        self._reader = Worker("job-store-read")
        try:
            self._file = self._writer.submit(_JobsFile, path)
        except BaseException:
            self._writer.close()
            self._reader.close()
            raise
        self._closed = False

    @classmethod
    def write_copy(
        cls,
        path: Path,
        rows: Sequence[dict[str, Any]],
        logs: Sequence[LogRow],
        last_id: int,
        fence: int,
    ) -> None:
        """Write jobs read from another store as they are into a new file:
        ``rows`` (with their ``archived`` flag), their ``logs`` and ``last_id``
        as the last id given out, fenced at ``fence`` (blocking)."""
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        jobs = _JobsFile(path)
        archived = {row["id"] for row in rows if row["archived"]}

        def body(db: sqlite3.Connection) -> None:
            for flag, table in ((False, "jobs"), (True, "archived_jobs")):
                db.executemany(
                    f"INSERT INTO {table} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (_job_values(row) for row in rows if bool(row["archived"]) == flag),
                )
            for flag, table in ((False, "joblog"), (True, "archived_joblog")):
                db.executemany(
                    f"INSERT INTO {table} VALUES (?, ?, ?, ?, ?, ?)",
                    ((*log[:5], _dumps(log[5])) for log in logs if (log[0] in archived) == flag),
                )
            db.execute("INSERT OR REPLACE INTO meta VALUES ('serial', ?)", (last_id,))

        try:
            jobs._write(body, fence)
        finally:
            jobs.close_reader()
            jobs.close_writer()

    async def insert_new(
        self, count: int, build: Callable[[list[int]], list[dict[str, Any]]], fence: int
    ) -> list[dict[str, Any]]:
        return await self._writer.run(self._file.insert_new, count, build, fence)

    async def write_batch(
        self, rows: Sequence[dict[str, Any]], logs: Sequence[LogRow], fence: int
    ) -> None:
        await self._writer.run(self._file.write_batch, rows, logs, fence)

    async def archive(self, job_ids: Sequence[int], fence: int) -> int:
        return await self._writer.run(self._file.archive, job_ids, fence)

    async def last_id(self) -> int:
        return await self._reader.run(self._file.last_id)

    async def fetch(
        self, job_ids: Sequence[int] | None, columns: Sequence[str], archived: bool = False
    ) -> list[dict[str, Any]]:
        return await self._reader.run(self._file.fetch, job_ids, columns, archived)

    async def fetch_logs(
        self, job_id: int, after: int = 0, archived: bool = False
    ) -> list[LogEntryRow]:
        return await self._reader.run(self._file.fetch_logs, job_id, after, archived)

    async def unfinished_ids(self) -> list[int]:
        return await self._reader.run(self._file.unfinished_ids)

    async def finished_before(self, timestamp: float | None) -> list[int]:
        return await self._reader.run(self._file.finished_before, timestamp)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._reader.run(self._file.close_reader)
        await self._writer.run(self._file.close_writer)
        self._reader.close()
        self._writer.close()


def _job_values(row: dict[str, Any]) -> tuple[Any, ...]:
    return (
        row["id"],
        row["status"],
        row["priority"],
        _dumps(row["summary"]),
        row["received_ts"],
        row["start_ts"],
        row["end_ts"],
        _dumps(row["ops"]),
        row["log_serial"],
    )


def _update_values(row: dict[str, Any]) -> tuple[Any, ...]:
    return (
        row["status"],
        row["priority"],
        row["start_ts"],
        row["end_ts"],
        _dumps(row["ops"]),
        row["log_serial"],
        row["id"],
    )


def _loads_many(texts: list[str]) -> list[Any]:
    """Decode many stored JSON documents at once.

    One ``json.loads`` of the documents joined into a JSON array costs a
    fraction of one call per document (10,000 job summaries: ~3 ms, not ~30).
    """
    if not texts:
        return []
    return list(json.loads("[" + ",".join(texts) + "]"))


def _chunks(items: Sequence[int], size: int) -> Iterable[list[int]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])
