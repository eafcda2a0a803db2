"""Changing a cluster's configuration directly, its masterd stopped (as tests
and benchmarks set up states no command makes, or an older Corral left).

Typical use::

    def edit(cfg: ConfigManager, tx: ConfigTransaction) -> None:
        node = cfg.lookup(Node, "node2").copy_for_update()
        node.offline = True
        tx.update(node)

    change_offline(cl.paths, edit)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from corral.config.manager import ConfigManager, ConfigTransaction
from corral.paths import Paths
from corral.state.sqlite.config import SqliteConfigStore
from corral.state.sqlite.kv import SqliteMastership

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
