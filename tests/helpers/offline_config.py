"""Changing a cluster's configuration or masterd's durable state directly,
its masterd stopped (as tests and benchmarks set up states no command makes,
or an older Corral left), and reading that state while masterd runs.

Typical use::

    def edit(cfg: ConfigManager, tx: ConfigTransaction) -> None:
        node = cfg.lookup(Node, "node2").copy_for_update()
        node.offline = True
        tx.update(node)

    change_offline(cl.paths, edit)
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from corral.config.manager import ConfigManager, ConfigTransaction
from corral.paths import Paths
from corral.services.durable import DurableState
from corral.state.sqlite.config import SqliteConfigStore
from corral.state.sqlite.kv import SqliteKeyValueStore, SqliteMastership

T = TypeVar("T")


def change_offline(paths: Paths, edit: Callable[[ConfigManager, ConfigTransaction], T]) -> T:
    """Stage changes with ``edit`` and commit them, as a master would: with a
    mastership lease of its own, so its writes are fenced as every master's."""

    async def run() -> T:
        mastership = SqliteMastership(paths.state_db)
        lease = await mastership.acquire("offline-edit", 60)
        cfg = await ConfigManager.open(SqliteConfigStore(paths.config_db))
        try:
            cfg.fence = lease.token
            tx = cfg.transaction()
            result = edit(cfg, tx)
            await tx.commit()
            return result
        finally:
            await cfg.close()
            await mastership.release(lease)
            await mastership.close()

    return asyncio.run(run())


def change_durable_offline(paths: Paths, edit: Callable[[DurableState], Awaitable[T]]) -> T:
    """Run ``edit`` on masterd's durable state, fenced as a master's writes."""

    async def run() -> T:
        mastership = SqliteMastership(paths.state_db)
        lease = await mastership.acquire("offline-edit", 60)
        state = await DurableState.open(SqliteKeyValueStore(paths.state_db), lease.token)
        try:
            return await edit(state)
        finally:
            await state.close()
            await mastership.release(lease)
            await mastership.close()

    return asyncio.run(run())


def durable_values(paths: Paths, prefix: str) -> dict[str, Any]:
    """masterd's durable state under ``prefix``, as on disk now (read-only)."""
    if not paths.state_db.exists():
        return {}
    with sqlite3.connect(f"file:{paths.state_db}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT key, value FROM kv WHERE substr(key, 1, ?) = ? ORDER BY key",
            (len(prefix), prefix),
        ).fetchall()
    return {key: json.loads(value) for key, value in rows}
