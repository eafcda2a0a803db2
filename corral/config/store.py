"""Where the configuration lives: SQLite in WAL mode, one row per object.

The ``ConfigStore`` protocol is all the rest of Corral sees, so a replicated
backend can replace the SQLite one without touching the logical units.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from corral import constants as C
from corral import errors, sqlite_faults

TABLES = ("cluster", "nodegroups", "nodes", "instances", "networks", "filters")

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    *(
        f"CREATE TABLE IF NOT EXISTS {table} ("
        " uuid TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, serial_no INTEGER NOT NULL,"
        " ctime REAL NOT NULL, mtime REAL NOT NULL, data TEXT NOT NULL)"
        for table in TABLES
    ),
]


@dataclass
class ConfigChange:
    """Everything one logical unit changed: rows to write and rows to delete.

    ``expected`` says, per table and uuid, which serial number the unit read
    (None: the object must not exist yet); the store refuses the whole change
    if any row differs, so no job ever writes over another job's change.
    """

    upserts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    deletes: dict[str, list[str]] = field(default_factory=dict)
    expected: dict[str, dict[str, int | None]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.upserts or self.deletes)


class ConfigConflict(errors.ConfigurationError):
    """A change was refused: what it read was changed meanwhile."""


class ConfigStore(Protocol):
    """A durable home for configuration objects."""

    def load(self) -> tuple[int, dict[str, list[dict[str, Any]]]]:
        """Return the cluster serial number and every object's data by table."""
        ...

    def commit(self, change: ConfigChange, serial: int) -> None:
        """Write one change atomically, together with the new cluster serial,
        if the store still holds cluster serial ``serial - 1`` and every object
        serial ``change.expected`` names (else ConfigConflict, nothing written)."""
        ...

    def close(self) -> None: ...


class SqliteConfigStore:
    """The configuration in one SQLite file (WAL mode)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        # FULL: a change acknowledged to a client survives a power loss.  Config
        # changes are rare, so one fsync per change costs nothing that shows.
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=5000")
        for stmt in _SCHEMA:
            self._db.execute(stmt)

    @classmethod
    def create(cls, path: Path, change: ConfigChange) -> SqliteConfigStore:
        """Create a new store holding ``change`` as its first content."""
        if path.exists():
            raise errors.ConfigurationError(f"Configuration {path} already exists")
        # Private from the start (SQLite gives the -wal and -shm files the same
        # mode): only root's daemons read the configuration, not corral-rapi.
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        store = cls(path)
        store._db.execute("INSERT INTO meta VALUES ('config_version', ?)", (str(C.CONFIG_VERSION),))
        store.commit(change, 1)
        return store

    def load(self) -> tuple[int, dict[str, list[dict[str, Any]]]]:
        meta = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
        version = int(meta.get("config_version", "0"))
        if version != C.CONFIG_VERSION:
            raise errors.ConfigVersionMismatch(
                f"Configuration version {version} is not the supported {C.CONFIG_VERSION}"
            )
        tables = {
            table: [json.loads(row[0]) for row in self._db.execute(f"SELECT data FROM {table}")]
            for table in TABLES
        }
        return int(meta.get("serial_no", "0")), tables

    def commit(self, change: ConfigChange, serial: int) -> None:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            self._check_expected(change, serial - 1)
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
            db.execute("COMMIT")
        except ConfigConflict:
            sqlite_faults.rollback(db)
            raise
        except BaseException as err:
            sqlite_faults.rollback(db)
            message = sqlite_faults.describe(err, "the configuration", self.path)
            if message is not None:
                raise errors.OpExecError(message, C.ECODE_ENVIRON) from err
            raise

    def _check_expected(self, change: ConfigChange, serial: int) -> None:
        """Compare what the change was based on with what the store holds."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'serial_no'").fetchone()
        stored = int(row[0]) if row else 0
        if stored != serial:
            raise ConfigConflict(
                f"The configuration is at serial {stored}, not {serial}: another"
                " process wrote it; restart the master daemon"
            )
        for table, serials in change.expected.items():
            for uuid, wanted in serials.items():
                row = self._db.execute(
                    f"SELECT name, serial_no FROM {table} WHERE uuid = ?", (uuid,)
                ).fetchone()
                found = None if row is None else int(row[1])
                if found != wanted:
                    name = row[0] if row else uuid
                    raise ConfigConflict(
                        f"Configuration object updated since it has been read: {table}"
                        f" '{name}' is at serial {found}, the change read {wanted}"
                    )

    def close(self) -> None:
        self._db.close()


def _rows(rows: Iterable[Mapping[str, Any]]) -> Iterable[tuple[Any, ...]]:
    for row in rows:
        yield (
            row["uuid"],
            row["name"],
            row["serial_no"],
            row["ctime"],
            row["mtime"],
            json.dumps(row, separators=(",", ":")),
        )
