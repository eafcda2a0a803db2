"""Moving masterd's stores back from etcd into SQLite while jobs run.

Once the master candidates are too few for etcd (fewer than
:data:`~corral.services.store_move.VOTERS_TO_MOVE`, or ``--etcd-members=no``),
the membership service moves the stores back before it touches the members,
so that they are read while etcd still has its voters:

1. The stores' gate is held (``corral.state.relay``): jobs go on running,
   their next write waits for the move and goes to SQLite.
2. The configuration, the jobs (queued and archived, with their logs) and
   the key-value state are written into new SQLite files beside the old ones
   (``config.db.back`` ...), with the mastership carried over with its fence
   token (never older than etcd's: the nodes refuse older tokens), then read
   back and compared.
3. The mastership in etcd is retired: its key stays, tied to no etcd lease and
   marked as moved to this node, so that no candidate standing by takes the
   mastership over on what etcd still holds.
4. The new files take the old ones' names, then ``store-home.json`` says
   SQLite on this node: the point of no return.  The relays pass calls to
   the SQLite stores from then on; etcd's copy stays as it was.

All or nothing: a failure before the switch removes the new files, the
mastership in etcd is renewed (which ties its key to its lease again) and
the etcd stores stay in force; the move is tried again later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from corral import errors
from corral.jobs.records import ROW_COLUMNS
from corral.paths import Paths
from corral.services.store_move import MoveFailed, job_logs, verify_copy
from corral.state import home
from corral.state.backend import sqlite_backend
from corral.state.etcd.mastership import EtcdMastership
from corral.state.ports import ConfigSnapshot, Lease, LeaseLost
from corral.state.relay import Stores
from corral.state.sqlite import kv as sqlite_kv
from corral.state.sqlite.config import SqliteConfigStore
from corral.state.sqlite.jobs import SqliteJobStore
from corral.state.sqlite.kv import SqliteKeyValueStore

if TYPE_CHECKING:
    from corral.services.context import Master

log = logging.getLogger(__name__)

# The suffix of the new SQLite files until they take the old ones' names.
ASIDE = ".back"
_SIDE_FILES = ("-wal", "-shm", "-journal")


def _files(paths: Paths) -> list[Path]:
    return [paths.config_db, paths.queue_db, paths.state_db]


def _aside(path: Path) -> Path:
    return path.with_name(path.name + ASIDE)


def _remove_aside(paths: Paths) -> None:
    """What an earlier, failed move back left (blocking)."""
    for path in _files(paths):
        aside = _aside(path)
        for name in (aside, *(Path(f"{aside}{side}") for side in _SIDE_FILES)):
            name.unlink(missing_ok=True)


async def move_to_sqlite(master: Master) -> home.SqliteHome:
    """Move ``master``'s stores from etcd back into SQLite on this node; where
    they are now."""
    relays, keeper, former = master.relays, master.keeper, master.backend
    if relays is None or keeper is None or former is None or former.client is None:
        raise errors.ProgrammerError("Only a master daemon on etcd moves its stores back")
    mastership = former.mastership
    assert isinstance(mastership, EtcdMastership)
    paths = master.paths
    async with relays.gate.move():
        lease = keeper.lease
        source = relays.stores
        try:
            if lease is None:
                raise LeaseLost("This master daemon lost its mastership")
            await asyncio.to_thread(_remove_aside, paths)
            snapshot = await _copy_aside(paths, source, lease)
            await _verify_aside(paths, source, snapshot)
            where = home.SqliteHome(keeper.holder, snapshot.serial)
            await _switch(paths, mastership, keeper.holder, lease, where, keeper.pause)
        except BaseException:
            keeper.resume()  # a renewal ties the mastership in etcd to its lease again
            with contextlib.suppress(Exception):
                await asyncio.to_thread(_remove_aside, paths)
            raise
        target = sqlite_backend(paths)
        relays.put_in_place(target.stores)
        # The same token as in etcd: the nodes see the same master.
        carried = Lease(lease.holder, lease.token, time.time() + keeper.ttl)
        keeper.hand_over(target.mastership, carried, None)
        master.backend = target
    log.info("The master's stores moved back to SQLite (config serial %d)", snapshot.serial)
    # The mastership in etcd stays retired: no candidate may lead on etcd's copy.
    await source.close()
    await former.close_rest()
    return where


async def _copy_aside(paths: Paths, source: Stores, lease: Lease) -> ConfigSnapshot:
    """Write what ``source`` holds into new SQLite files; the configuration copied."""
    snapshot = await source.config.load()
    values = {key: item.value for key, item in (await source.kv.scan("")).items()}
    rows = await source.jobs.fetch(None, ROW_COLUMNS, archived=True)
    logs = await job_logs(source, rows)
    last_id = await source.jobs.last_id()
    config, jobs, state = (_aside(p) for p in _files(paths))
    await asyncio.to_thread(SqliteConfigStore.write_copy, config, snapshot, lease.token)
    await asyncio.to_thread(SqliteJobStore.write_copy, jobs, rows, logs, last_id, lease.token)
    await asyncio.to_thread(sqlite_kv.write_copy, state, values, lease)
    return snapshot


async def _verify_aside(paths: Paths, source: Stores, snapshot: ConfigSnapshot) -> None:
    """MoveFailed unless the new files hold what ``source`` holds."""
    config, jobs, state = (_aside(p) for p in _files(paths))
    copy = Stores(SqliteConfigStore(config), SqliteJobStore(jobs), SqliteKeyValueStore(state))
    try:
        await verify_copy(source, copy, snapshot)
    finally:
        await copy.close()  # the last connection gone, SQLite folds its WAL in


async def _switch(
    paths: Paths,
    mastership: EtcdMastership,
    holder: str,
    lease: Lease,
    where: home.SqliteHome,
    pause: Callable[[], Awaitable[None]],
) -> None:
    """Retire the mastership in etcd, put the new files in place, write the home."""
    await pause()  # a renewal would tie the key to its lease again
    await mastership.retire(lease, holder)
    await asyncio.to_thread(_put_in_place, paths)
    await asyncio.to_thread(home.write, paths.store_home, where)


def _put_in_place(paths: Paths) -> None:
    """The new files take the old ones' names (blocking)."""
    for path in _files(paths):
        aside = _aside(path)
        if any(Path(f"{aside}{side}").exists() for side in ("-wal", "-journal")):
            raise MoveFailed(f"The copy {aside} was not written through; nothing moved")
    for path in _files(paths):
        # The old file's journal must not be applied to the new one.
        for side in _SIDE_FILES:
            Path(f"{path}{side}").unlink(missing_ok=True)
        Path(f"{_aside(path)}-shm").unlink(missing_ok=True)
        os.replace(_aside(path), path)
    directory = os.open(paths.config_db.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
