"""Schema versions of masterd's stores, and the steps that upgrade older data.

Each store (the configuration, the job queue, the master's state) records
the version of its layout: ``schema_version`` in the ``meta`` table of its
SQLite file, a ``schema/<store>`` key in etcd (``corral.state.etcd.schema``).
:data:`UPGRADES` holds, per store, one step per version: step ``v`` turns data
of version ``v`` into data of version ``v + 1``, on either backend.  The
version this code writes is the number of steps, so a change of layout adds
a row, and nothing else.

Data written before versions were recorded (Corral up to 200d382 and after,
until this module) is version 0: the same tables, except that the
configuration of 200d382 lacks ``changes`` and ``disks`` (later code made
them at each open, so unversioned files may have them or not).

A SQLite file is upgraded all or nothing (:func:`upgrade_files`): the steps
run in one transaction on a copy; only when every store named has its
upgraded copy does each old file go to ``<file>.pre-upgrade-<old version>``
(byte for byte) and its copy take its place.  A file of a newer version is
refused, and nothing is written.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import corral
from corral import errors

if TYPE_CHECKING:
    from corral.state.etcd.client import EtcdClient

log = logging.getLogger(__name__)

CONFIG = "config"
JOBS = "jobs"
STATE = "state"
WHAT = {CONFIG: "the configuration", JOBS: "the job queue", STATE: "the master's state"}
VERSION_KEY = "schema_version"
BACKUP_SUFFIX = ".pre-upgrade-"


def _nothing(db: sqlite3.Connection) -> None:
    """A step that changes no table: only the version it leads to is written."""


async def _no_ops(client: EtcdClient, prefix: str) -> list[dict[str, Any]]:
    """A step with nothing to write in etcd but the version."""
    return []


def _config_tables(db: sqlite3.Connection) -> None:
    # Written out, not SqliteConfigStore's schema: a step must do forever what
    # it did when written, whatever later versions make of those tables.
    db.execute(
        "CREATE TABLE IF NOT EXISTS changes (serial INTEGER PRIMARY KEY, change TEXT NOT NULL)"
    )
    db.execute(
        "CREATE TABLE IF NOT EXISTS disks (uuid TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
        " serial_no INTEGER NOT NULL, ctime REAL NOT NULL, mtime REAL NOT NULL, data TEXT NOT NULL)"
    )


@dataclass(frozen=True)
class Step:
    """One upgrade by one version, on each backend (inside one transaction:
    ``sqlite`` changes the connection's file; ``etcd`` gives the operations
    to write with the new version)."""

    what: str
    sqlite: Callable[[sqlite3.Connection], None]
    etcd: Callable[[EtcdClient, str], Awaitable[list[dict[str, Any]]]]


UPGRADES: dict[str, dict[int, Step]] = {
    CONFIG: {
        0: Step("the tables changes and disks, which 200d382 lacks", _config_tables, _no_ops),
    },
    JOBS: {0: Step("versions recorded (the layout of 200d382)", _nothing, _no_ops)},
    STATE: {0: Step("versions recorded (state.db is newer than 200d382)", _nothing, _no_ops)},
}


def current(store: str) -> int:
    """The schema version this code writes for ``store``."""
    return len(UPGRADES[store])


def backup_path(path: Path, version: int) -> Path:
    """Where the file ``path`` of schema version ``version`` is kept when upgraded."""
    return path.with_name(f"{path.name}{BACKUP_SUFFIX}{version}")


def too_new(store: str, where: str, found: int, backup: str) -> errors.ConfigVersionMismatch:
    """The refusal of data of a newer schema, in one line: both versions and
    what to do."""
    return errors.ConfigVersionMismatch(
        f"{where} holds {WHAT[store]} at schema version {found}, newer than version"
        f" {current(store)} of Corral {corral.__version__}: run the newer Corral,"
        f" or restore {backup}"
    )


def stamp_new(db: sqlite3.Connection, store: str) -> None:
    """Record the current version in a store's file that has none: a new file
    (an existing one was upgraded, and so has one, before it was opened)."""
    db.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", (VERSION_KEY, current(store)))


@dataclass(frozen=True)
class _Upgraded:
    """A file's upgraded copy, waiting to take its place."""

    path: Path
    store: str
    found: int
    work: Path


def upgrade_files(files: Sequence[tuple[Path, str]]) -> list[tuple[Path, int]]:
    """Bring every ``(file, store)`` that exists to its store's current
    version, all or nothing (blocking); the files upgraded, with the version
    each had.  A missing or empty file is left for its store to make."""
    ready: list[_Upgraded] = []
    try:
        for path, store in files:
            found = _older_version(path, store)
            if found is not None:
                ready.append(_upgraded_copy(path, store, found))
    except BaseException:
        for done in ready:
            _remove(done.work)
        raise
    for done in ready:
        _put_in_place(done)
    return [(done.path, done.found) for done in ready]


def _older_version(path: Path, store: str) -> int | None:
    """The file's version if older than the current one (None: no file, a
    new one, or current); refused if newer."""
    try:
        if path.stat().st_size == 0 and not _wal(path).exists():
            return None
    except FileNotFoundError:
        return None
    found = read_version(path)
    if found > current(store):
        raise too_new(store, str(path), found, str(backup_path(path, current(store))))
    return None if found == current(store) else found


def read_version(path: Path) -> int:
    """The schema version of a store's SQLite file (0: none recorded)."""
    if _wal(path).exists():
        # Committed writes may be in the log only: a connection that reads it.
        db = sqlite3.connect(str(path))
    else:
        # All is in the file: a read that writes nothing, not even a -shm file.
        db = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro&immutable=1", uri=True)
    try:
        row = db.execute("SELECT value FROM meta WHERE key = ?", (VERSION_KEY,)).fetchone()
    except sqlite3.DatabaseError as err:
        raise errors.ConfigurationError(f"Cannot read the schema version of {path}: {err}") from err
    finally:
        db.close()
    return int(row[0]) if row else 0


def _settle_wal(path: Path) -> None:
    """Write into the file what its write-ahead log holds (left by a daemon
    that did not stop cleanly): the content stays, the copies see it all."""
    if _wal(path).exists():
        db = sqlite3.connect(str(path))
        try:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            db.close()


def _upgraded_copy(path: Path, store: str, found: int) -> _Upgraded:
    """A copy of the file with every step from ``found`` on applied."""
    work = path.with_name(path.name + ".upgrading")
    _remove(work)
    _settle_wal(path)
    _copy(path, work)
    wanted = current(store)
    try:
        _run_steps(work, store, found, wanted)
    except Exception as err:
        _remove(work)
        raise errors.ConfigurationError(
            f"Cannot upgrade {WHAT[store]} in {path} from schema version {found} to"
            f" {wanted}: {err.__class__.__name__}: {err}; the file is unchanged"
        ) from err
    return _Upgraded(path, store, found, work)


def _run_steps(work: Path, store: str, found: int, wanted: int) -> None:
    db = sqlite3.connect(str(work), isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        for version in range(found, wanted):
            UPGRADES[store][version].sqlite(db)
        db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (VERSION_KEY, wanted))
        db.execute("COMMIT")
    finally:
        db.close()  # the last connection: the WAL goes into the file
    _fsync(work)


def _put_in_place(done: _Upgraded) -> None:
    """The old file to its backup, the upgraded copy in its place."""
    backup = backup_path(done.path, done.found)
    _copy(done.path, backup)
    os.replace(done.work, done.path)
    _fsync(done.path.parent)
    log.warning(
        "Upgraded %s in %s from schema version %d to %d; the old file is kept as %s",
        WHAT[done.store], done.path, done.found, current(done.store), backup,
    )  # fmt: skip


def _wal(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


def _copy(source: Path, target: Path) -> None:
    """``source`` byte for byte (and its mode) at ``target``, durably."""
    partial = target.with_name(target.name + ".tmp")
    shutil.copy2(source, partial)
    _fsync(partial)
    os.replace(partial, target)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(work: Path) -> None:
    for name in (work.name, work.name + "-wal", work.name + "-shm", work.name + "-journal"):
        with contextlib.suppress(FileNotFoundError):
            (work.parent / name).unlink()
