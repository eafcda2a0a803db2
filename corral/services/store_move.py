"""Moving masterd's stores from SQLite into etcd while jobs run: copy, verify, switch.

A cluster's stores start in SQLite on the master.  Once etcd has three
voters (three master candidates run members: ``corral.services.etcd_members``),
the master moves its configuration, job queue and key-value state into etcd,
under the cluster's own key prefix, and keeps the mastership there:

1. The stores' gate is held (``corral.state.relay``): the writes under way
   end, those that come meanwhile wait.  Jobs go on running; their next
   write waits for the move and goes to etcd.
2. The mastership is carried over with its fence token, so the nodes (which
   refuse older tokens) and the stores see the same master before and after.
3. Everything is copied, then read back from etcd and compared.
4. ``store-home.json`` is written: the point of no return.  The relays pass
   calls to the etcd stores from then on; the SQLite files stay as they were.

All or nothing: should any step before the switch fail, what was written
under the prefix is removed and the SQLite stores stay in force (the move
is tried again later).  The way back, once the candidates are too few, is
``corral.services.store_move_back``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from corral import errors
from corral.jobs.records import ROW_COLUMNS
from corral.state import home
from corral.state.backend import Backend, etcd_parts
from corral.state.etcd import client as etcd
from corral.state.etcd.client import EtcdClient, prefix_end
from corral.state.etcd.jobs import EtcdJobStore
from corral.state.ports import ConfigSnapshot, LeaseLost, LogRow
from corral.state.relay import Stores

if TYPE_CHECKING:
    from corral.services.context import Master

log = logging.getLogger(__name__)

# Voters etcd needs before the stores move in (one may fail).
VOTERS_TO_MOVE = 3


class MoveFailed(errors.ConfigurationError):
    """The stores' copy differs from the original: nothing moved."""


async def move_to_etcd(master: Master, client: EtcdClient) -> home.EtcdHome:
    """Move ``master``'s stores into etcd, called through ``client`` (theirs
    from then on: closed if the move fails); where they are now."""
    relays, keeper, former = master.relays, master.keeper, master.backend
    if relays is None or keeper is None or former is None or former.client is not None:
        await client.close()
        raise errors.ProgrammerError("Only a master daemon on SQLite moves its stores")
    paths = master.paths
    prefix = home.prefix_of(master.cfg.cluster.uuid)
    config, jobs, kv, mastership = etcd_parts(client, prefix)
    target = Backend(Stores(config, jobs, kv), mastership, client)
    async with relays.gate.move():
        lease = keeper.lease
        try:
            if lease is None:
                raise LeaseLost("This master daemon lost its mastership")
            await _clear(client, prefix)  # what an earlier, failed move left
            carried = await mastership.carry_on(lease, keeper.ttl)
            source = relays.stores
            snapshot = await source.config.load()
            await config.copy_in(snapshot, lease.token)
            await _copy_rest(source, jobs, target.stores, lease.token)
            await verify_copy(source, target.stores, snapshot)
            where = home.EtcdHome(prefix, tuple(client.endpoints), snapshot.serial)
            await asyncio.to_thread(home.write, paths.store_home, where)
        except BaseException:
            with contextlib.suppress(Exception):
                await _clear(client, prefix)
            await target.close_rest()
            raise
        relays.put_in_place(target.stores)
        former_mastership = keeper.hand_over(mastership, carried, mastership)
        master.backend = target
    log.info("The master's stores moved to etcd (%s, config serial %d)", prefix, snapshot.serial)
    with contextlib.suppress(Exception):  # nothing writes there any more
        await former_mastership.release(lease)
    await source.close()
    await former.close_rest()
    return where


async def _clear(client: EtcdClient, prefix: str) -> None:
    await client.txn([], [etcd.delete_range(prefix, prefix_end(prefix))])


async def job_logs(source: Stores, rows: list[dict[str, Any]]) -> list[LogRow]:
    """The log entries of the jobs ``rows`` (queued or archived), as a copy writes them."""
    logs: list[LogRow] = []
    for row in rows:
        for op_idx, (serial, ts, kind, message) in await source.jobs.fetch_logs(
            row["id"], 0, bool(row["archived"])
        ):
            logs.append((row["id"], op_idx, serial, ts, kind, message))
    return logs


async def _copy_rest(source: Stores, jobs: EtcdJobStore, target: Stores, fence: int) -> None:
    """Copy the key-value state and the jobs (queued and archived, with their logs)."""
    for key, item in sorted((await source.kv.scan("")).items()):
        await target.kv.put(key, item.value, fence)
    rows = await source.jobs.fetch(None, ROW_COLUMNS, archived=True)
    await jobs.copy_in(rows, await job_logs(source, rows), await source.jobs.last_id(), fence)


def _tables(snapshot: ConfigSnapshot) -> dict[str, list[dict[str, Any]]]:
    return {
        table: sorted(rows, key=lambda row: str(row["uuid"]))
        for table, rows in snapshot.tables.items()
        if rows
    }


async def verify_copy(source: Stores, target: Stores, snapshot: ConfigSnapshot) -> None:
    """MoveFailed unless ``target`` holds what ``source`` holds (``snapshot``:
    its configuration as copied)."""
    moved = await target.config.load()
    if moved.serial != snapshot.serial or _tables(moved) != _tables(snapshot):
        raise MoveFailed("The configuration read back from the copy differs from the original")
    before = {k: v.value for k, v in (await source.kv.scan("")).items()}
    if {k: v.value for k, v in (await target.kv.scan("")).items()} != before:
        raise MoveFailed("The master's state read back from the copy differs from the original")
    columns = ["status", "log_serial"]
    if await target.jobs.fetch(None, columns, True) != await source.jobs.fetch(None, columns, True):
        raise MoveFailed("The jobs read back from the copy differ from the originals")
    if await target.jobs.last_id() != await source.jobs.last_id():
        raise MoveFailed("The last job id read back from the copy differs from the original")
