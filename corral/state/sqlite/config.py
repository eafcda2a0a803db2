"""The configuration in one SQLite file (WAL mode), one row per object.

Every commit also appends the change to a bounded log (``changes``), which
``changes()`` serves to whoever follows the configuration; its waiters are
woken by the commits of this process, the only writer of the file.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from corral import constants as C
from corral import errors, sqlite_faults
from corral.state import schema
from corral.state.ports import (
    ChangesExpired,
    ConfigChange,
    ConfigSnapshot,
    FencedOut,
    SerialChange,
    commit_one,
    object_conflict,
    serial_conflict,
)
from corral.state.sqlite.fencing import check_fence
from corral.state.sqlite.worker import Worker

# A table added later (filters, disks) is created when an older store opens:
# an existing configuration loads with it empty, at the same version.
TABLES = ("cluster", "nodegroups", "nodes", "instances", "networks", "filters", "disks")
# Committed changes kept for followers; an older serial means "load it all".
KEPT_CHANGES = 1000

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS changes (serial INTEGER PRIMARY KEY, change TEXT NOT NULL)",
    *(
        f"CREATE TABLE IF NOT EXISTS {table} ("
        " uuid TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, serial_no INTEGER NOT NULL,"
        " ctime REAL NOT NULL, mtime REAL NOT NULL, data TEXT NOT NULL)"
        for table in TABLES
    ),
]
_dumps = json.JSONEncoder(separators=(",", ":")).encode


class SqliteConfigStore:
    """The configuration store of a cluster without master candidates."""

    def __init__(self, path: Path, kept_changes: int = KEPT_CHANGES) -> None:
        self.path = path
        self._kept = kept_changes
        self._worker = Worker("config-store")
        self._db = self._worker.submit(_connect, path)
        self._committed = asyncio.Condition()
        self._closed = False

    @classmethod
    def create(cls, path: Path, change: ConfigChange) -> None:
        """Write a new configuration holding ``change`` as serial 1 (no event
        loop needed: ``gnt-cluster init`` calls it)."""
        if path.exists():
            raise errors.ConfigurationError(f"Configuration {path} already exists")
        # Private from the start (SQLite gives the -wal and -shm files the same
        # mode): only root's daemons read the configuration, not corral-rapi.
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        db = _connect(path)
        try:
            db.execute("INSERT INTO meta VALUES ('config_version', ?)", (str(C.CONFIG_VERSION),))
            (refused,) = _commit_many(db, path, [change], 1, 0, KEPT_CHANGES)
            if refused is not None:
                raise refused
        finally:
            db.close()

    @classmethod
    def write_copy(cls, path: Path, snapshot: ConfigSnapshot, fence: int) -> None:
        """Write ``snapshot``, read from another store, as a new file at its
        cluster serial (no change before it is kept), fenced at ``fence``
        (blocking: run it in a thread)."""
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        db = _connect(path)
        try:
            db.execute("BEGIN IMMEDIATE")
            check_fence(db, fence, "the configuration")
            db.execute("INSERT INTO meta VALUES ('config_version', ?)", (str(C.CONFIG_VERSION),))
            db.execute("INSERT INTO meta VALUES ('serial_no', ?)", (str(snapshot.serial),))
            for table, rows in snapshot.tables.items():
                db.executemany(f"INSERT INTO {table} VALUES (?, ?, ?, ?, ?, ?)", _rows(rows))
            db.execute("COMMIT")
        finally:
            db.close()

    async def load(self) -> ConfigSnapshot:
        return await self._worker.run(_load, self._db)

    async def commit(self, change: ConfigChange, serial: int, fence: int) -> None:
        await commit_one(self, change, serial, fence)

    async def commit_many(
        self, changes: Sequence[ConfigChange], serial: int, fence: int
    ) -> list[Exception | None]:
        refusals = await self._worker.run(
            _commit_many, self._db, self.path, list(changes), serial, fence, self._kept
        )
        if None in refusals:
            async with self._committed:
                self._committed.notify_all()
        return refusals

    async def changes(self, since: int, timeout: float) -> list[SerialChange]:
        found = await self._worker.run(_changes, self._db, since)
        if found:
            return found
        try:
            async with asyncio.timeout(timeout), self._committed:
                while not (found := await self._worker.run(_changes, self._db, since)):
                    await self._committed.wait()
        except TimeoutError:
            return []
        return found

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._worker.run(self._db.close)
        self._worker.close()


def _connect(path: Path) -> sqlite3.Connection:
    schema.upgrade_files([(path, schema.CONFIG)])
    db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    # FULL: a change acknowledged to a client survives a power loss.  Config
    # changes are rare, so one fsync per change costs nothing that shows.
    db.execute("PRAGMA synchronous=FULL")
    db.execute("PRAGMA busy_timeout=5000")
    for stmt in _SCHEMA:
        db.execute(stmt)
    schema.stamp_new(db, schema.CONFIG)
    return db


def _load(db: sqlite3.Connection) -> ConfigSnapshot:
    meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    version = int(meta.get("config_version", "0"))
    if version != C.CONFIG_VERSION:
        raise errors.ConfigVersionMismatch(
            f"Configuration version {version} is not the supported {C.CONFIG_VERSION}"
        )
    tables = {
        table: [json.loads(row[0]) for row in db.execute(f"SELECT data FROM {table}")]
        for table in TABLES
    }
    return ConfigSnapshot(int(meta.get("serial_no", "0")), tables)


def _commit_many(
    db: sqlite3.Connection,
    path: Path,
    changes: list[ConfigChange],
    serial: int,
    fence: int,
    kept: int,
) -> list[Exception | None]:
    """Write ``changes`` in one transaction (one sync), each as the next serial
    from ``serial`` on, or refused alone (its refusal in the list: a Conflict,
    a clash of names, a row that is not JSON)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        check_fence(db, fence, "the configuration")
        refusals: list[Exception | None] = []
        for change in changes:
            db.execute("SAVEPOINT change")
            try:
                _write_change(db, change, serial)
            except Exception as err:
                if sqlite_faults.describe(err, "the configuration", path) is not None:
                    raise  # the store's fault, not the change's: all are refused
                db.execute("ROLLBACK TO change")
                refusals.append(err)
            else:
                refusals.append(None)
                serial += 1
            db.execute("RELEASE change")
        db.execute("DELETE FROM changes WHERE serial < ?", (serial - kept,))
        db.execute("COMMIT")
    except FencedOut:
        sqlite_faults.rollback(db)
        raise
    except BaseException as err:
        sqlite_faults.rollback(db)
        message = sqlite_faults.describe(err, "the configuration", path)
        if message is not None:
            raise errors.OpExecError(message, C.ECODE_ENVIRON) from err
        raise
    return refusals


def _write_change(db: sqlite3.Connection, change: ConfigChange, serial: int) -> None:
    """Inside a transaction: ``change`` as cluster serial ``serial``, or Conflict."""
    _check_expected(db, change, serial - 1)
    # Deletes first: a removed object's name may be reused in the same change.
    for table, uuids in change.deletes.items():
        db.executemany(f"DELETE FROM {table} WHERE uuid = ?", ((u,) for u in uuids))
    for table, rows in change.upserts.items():
        db.executemany(
            # An upsert by uuid: a clash of names fails instead of replacing a row.
            f"INSERT INTO {table} VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(uuid) DO UPDATE"
            " SET name = excluded.name, serial_no = excluded.serial_no,"
            " ctime = excluded.ctime, mtime = excluded.mtime, data = excluded.data",
            _rows(rows),
        )
    db.execute("INSERT OR REPLACE INTO meta VALUES ('serial_no', ?)", (str(serial),))
    db.execute("INSERT INTO changes VALUES (?, ?)", (serial, _dumps(asdict(change))))


def _check_expected(db: sqlite3.Connection, change: ConfigChange, serial: int) -> None:
    """Compare what the change was based on with what the store holds."""
    row = db.execute("SELECT value FROM meta WHERE key = 'serial_no'").fetchone()
    stored = int(row[0]) if row else 0
    if stored != serial:
        raise serial_conflict(stored, serial)
    for table, serials in change.expected.items():
        for uuid, wanted in serials.items():
            row = db.execute(f"SELECT name, serial_no FROM {table} WHERE uuid = ?", (uuid,))
            found_row = row.fetchone()
            found = None if found_row is None else int(found_row[1])
            if found != wanted:
                name = found_row[0] if found_row else uuid
                raise object_conflict(table, name, found, wanted)


def _changes(db: sqlite3.Connection, since: int) -> list[SerialChange]:
    rows = db.execute(
        "SELECT serial, change FROM changes WHERE serial > ? ORDER BY serial", (since,)
    ).fetchall()
    current = db.execute("SELECT value FROM meta WHERE key = 'serial_no'").fetchone()
    latest = int(current[0]) if current else 0
    first = rows[0][0] if rows else latest + 1
    if since < latest and first != since + 1:
        raise ChangesExpired(
            f"The configuration changes after serial {since} are no longer kept"
            f" (the oldest kept is {first}); load the configuration again"
        )
    return [SerialChange(serial, ConfigChange(**json.loads(text))) for serial, text in rows]


def _rows(rows: Iterable[Mapping[str, Any]]) -> Iterable[tuple[Any, ...]]:
    for row in rows:
        yield (
            row["uuid"],
            row["name"],
            row["serial_no"],
            row["ctime"],
            row["mtime"],
            _dumps(row),
        )
