"""The key-value store and the mastership of a one-node cluster: one SQLite
file (``state.db`` in the data directory, WAL, fsynced commits).

The mastership is always granted (there is no other candidate): acquiring
it makes the newest lease, with a token one above every token given before,
so the writes of a master daemon that still runs from before (a stale
process on the same root) are fenced out from then on.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from corral import errors, sqlite_faults
from corral.state import schema
from corral.state.ports import Conflict, FencedOut, Lease, LeaseLost, Versioned, version_conflict
from corral.state.sqlite.fencing import check_fence
from corral.state.sqlite.worker import Worker

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL,"
    " version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS lease (id INTEGER PRIMARY KEY CHECK (id = 1),"
    " holder TEXT NOT NULL, token INTEGER NOT NULL, expires REAL NOT NULL)",
)
_dumps = json.JSONEncoder(separators=(",", ":")).encode


def _connect(path: Path) -> sqlite3.Connection:
    schema.upgrade_files([(path, schema.STATE)])
    # Private: it holds join tokens' hashes and what operations under way do.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)
    db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("PRAGMA busy_timeout=5000")
    for stmt in _SCHEMA:
        db.execute(stmt)
    schema.stamp_new(db, schema.STATE)
    return db


class _StateFile:
    """One connection to ``state.db`` and its write transactions."""

    def __init__(self, path: Path, name: str) -> None:
        self.path = path
        self.worker = Worker(name)
        self.db = self.worker.submit(_connect, path)
        self.closed = False

    def write(self, body: Any, *args: Any) -> Any:
        """``body(db, *args)`` in one write transaction (in the worker's thread)."""
        db = self.db
        try:
            db.execute("BEGIN IMMEDIATE")
            result = body(db, *args)
            db.execute("COMMIT")
        except (Conflict, FencedOut, LeaseLost):
            sqlite_faults.rollback(db)
            raise
        except BaseException as err:
            sqlite_faults.rollback(db)
            message = sqlite_faults.describe(err, "the master's state", self.path)
            if message is not None:
                raise errors.ConfigurationError(message) from err
            raise
        return result

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        await self.worker.run(self.db.close)
        self.worker.close()


class SqliteKeyValueStore:
    """Versioned JSON values under string keys (see ports.KeyValueStore)."""

    def __init__(self, path: Path) -> None:
        self._file = _StateFile(path, "kv-store")

    async def get(self, key: str) -> Versioned | None:
        return await self._file.worker.run(_get, self._file.db, key)

    async def scan(self, prefix: str) -> dict[str, Versioned]:
        return await self._file.worker.run(_scan, self._file.db, prefix)

    async def put(self, key: str, value: Any, fence: int, expected: int | None = None) -> int:
        version: int = await self._file.worker.run(
            self._file.write, _put, key, _dumps(value), fence, expected
        )
        return version

    async def delete(self, key: str, fence: int, expected: int | None = None) -> bool:
        existed: bool = await self._file.worker.run(self._file.write, _delete, key, fence, expected)
        return existed

    async def close(self) -> None:
        await self._file.close()


def _get(db: sqlite3.Connection, key: str) -> Versioned | None:
    row = db.execute("SELECT value, version FROM kv WHERE key = ?", (key,)).fetchone()
    return None if row is None else Versioned(json.loads(row[0]), int(row[1]))


def _scan(db: sqlite3.Connection, prefix: str) -> dict[str, Versioned]:
    # substr, not LIKE: a key may hold "%" or "_".
    rows = db.execute(
        "SELECT key, value, version FROM kv WHERE substr(key, 1, ?) = ? ORDER BY key",
        (len(prefix), prefix),
    )
    return {key: Versioned(json.loads(value), int(version)) for key, value, version in rows}


def _version_check(db: sqlite3.Connection, key: str, expected: int | None) -> int:
    """The key's version now (0: none), refused unless it is ``expected``."""
    row = db.execute("SELECT version FROM kv WHERE key = ?", (key,)).fetchone()
    current = int(row[0]) if row else 0
    if expected is not None and current != expected:
        raise version_conflict(key, current, expected)
    return current


def _next_version(db: sqlite3.Connection) -> int:
    row = db.execute("SELECT value FROM meta WHERE key = 'revision'").fetchone()
    revision = (int(row[0]) if row else 0) + 1
    db.execute("INSERT OR REPLACE INTO meta VALUES ('revision', ?)", (revision,))
    return revision


def _put(db: sqlite3.Connection, key: str, text: str, fence: int, expected: int | None) -> int:
    check_fence(db, fence, "the master's state")
    _version_check(db, key, expected)
    version = _next_version(db)
    db.execute("INSERT OR REPLACE INTO kv VALUES (?, ?, ?)", (key, text, version))
    return version


def _delete(db: sqlite3.Connection, key: str, fence: int, expected: int | None) -> bool:
    check_fence(db, fence, "the master's state")
    current = _version_check(db, key, expected)
    if not current:
        return False
    db.execute("DELETE FROM kv WHERE key = ?", (key,))
    _next_version(db)
    return True


def write_copy(path: Path, values: dict[str, Any], lease: Lease) -> None:
    """A new ``state.db``: ``values`` read from another store, and the
    mastership ``lease`` carried over with its token, which fences every
    write (blocking: run it in a thread)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    db = _connect(path)
    try:
        db.execute("BEGIN IMMEDIATE")
        check_fence(db, lease.token, "the master's state")
        db.executemany(
            "INSERT INTO kv VALUES (?, ?, ?)",
            ((key, _dumps(value), version) for version, (key, value) in enumerate(
                sorted(values.items()), 1
            )),
        )  # fmt: skip
        db.execute("INSERT INTO meta VALUES ('revision', ?)", (len(values),))
        db.execute(
            "INSERT INTO lease VALUES (1, ?, ?, ?)", (lease.holder, lease.token, lease.expires)
        )
        db.execute("COMMIT")
    finally:
        db.close()


class SqliteMastership:
    """The mastership of a one-node cluster (see ports.Mastership)."""

    def __init__(self, path: Path) -> None:
        self._file = _StateFile(path, "mastership")

    async def acquire(self, holder: str, ttl: float) -> Lease:
        lease: Lease = await self._file.worker.run(self._file.write, _acquire, holder, ttl)
        return lease

    async def renew(self, lease: Lease, ttl: float) -> Lease:
        renewed: Lease = await self._file.worker.run(self._file.write, _renew, lease, ttl)
        return renewed

    async def release(self, lease: Lease) -> None:
        await self._file.worker.run(self._file.write, _release, lease)

    async def current(self) -> Lease | None:
        lease = await self._file.worker.run(_current, self._file.db)
        return lease if lease is not None and lease.expires > time.time() else None

    async def close(self) -> None:
        await self._file.close()


def _current(db: sqlite3.Connection) -> Lease | None:
    row = db.execute("SELECT holder, token, expires FROM lease WHERE id = 1").fetchone()
    return None if row is None else Lease(row[0], int(row[1]), float(row[2]))


def _acquire(db: sqlite3.Connection, holder: str, ttl: float) -> Lease:
    # One node: no other candidate can hold it; the newest acquirer wins.
    previous = _current(db)
    token = (previous.token if previous else 0) + 1
    lease = Lease(holder, token, time.time() + ttl)
    db.execute("INSERT OR REPLACE INTO lease VALUES (1, ?, ?, ?)", (holder, token, lease.expires))
    return lease


def _renew(db: sqlite3.Connection, lease: Lease, ttl: float) -> Lease:
    current = _current(db)
    if current is None or current.token != lease.token:
        raise LeaseLost(f"The mastership of {lease.holder} (token {lease.token}) was taken over")
    renewed = Lease(lease.holder, lease.token, time.time() + ttl)
    db.execute("UPDATE lease SET expires = ? WHERE id = 1", (renewed.expires,))
    return renewed


def _release(db: sqlite3.Connection, lease: Lease) -> None:
    current = _current(db)
    if current is not None and current.token == lease.token:
        db.execute("UPDATE lease SET expires = 0 WHERE id = 1")
