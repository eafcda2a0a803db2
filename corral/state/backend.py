"""masterd's stores of one kind: SQLite on the master, or etcd on the candidates.

Which one a master opens is what ``store-home.json`` says (``corral.state.home``):
no file or SQLite, the SQLite files of the data directory; else the etcd
keyspace and members it names.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from corral.paths import Paths
from corral.state import home, schema
from corral.state.etcd import schema as etcd_schema
from corral.state.etcd.client import EtcdClient, client_ssl_context
from corral.state.etcd.config import EtcdConfigStore
from corral.state.etcd.jobs import EtcdJobStore
from corral.state.etcd.kv import EtcdKeyValueStore
from corral.state.etcd.mastership import EtcdMastership
from corral.state.ports import HandOver, Mastership
from corral.state.relay import Stores
from corral.state.sqlite.config import SqliteConfigStore
from corral.state.sqlite.jobs import SqliteJobStore
from corral.state.sqlite.kv import SqliteKeyValueStore, SqliteMastership


@dataclass
class Backend:
    """Three stores, the mastership beside them and the etcd client they share."""

    stores: Stores
    mastership: Mastership
    # None: SQLite.
    client: EtcdClient | None = None

    @property
    def handover(self) -> HandOver | None:
        """The mastership as candidates stand by for it (None: one node)."""
        return self.mastership if isinstance(self.mastership, EtcdMastership) else None

    @property
    def kind(self) -> str:
        return "sqlite" if self.client is None else "etcd"

    async def close_rest(self) -> None:
        """Close the mastership and the client (the stores are their users')."""
        await self.mastership.close()
        if self.client is not None:
            await self.client.close()


def sqlite_backend(paths: Paths) -> Backend:
    """The SQLite files of the master's data directory."""
    return Backend(
        Stores(
            SqliteConfigStore(paths.config_db),
            SqliteJobStore(paths.queue_db),
            SqliteKeyValueStore(paths.state_db),
        ),
        SqliteMastership(paths.state_db),
    )


def sqlite_files(paths: Paths) -> list[tuple[Path, str]]:
    """The SQLite files of the master's stores, each with its store's name."""
    return [
        (paths.config_db, schema.CONFIG),
        (paths.queue_db, schema.JOBS),
        (paths.state_db, schema.STATE),
    ]


def etcd_parts(
    client: EtcdClient, prefix: str
) -> tuple[EtcdConfigStore, EtcdJobStore, EtcdKeyValueStore, EtcdMastership]:
    """The stores and the mastership under ``prefix``, called through ``client``."""
    return (
        EtcdConfigStore(client, prefix),
        EtcdJobStore(client, prefix),
        EtcdKeyValueStore(client, prefix),
        EtcdMastership(client, prefix),
    )


async def etcd_backend(paths: Paths, prefix: str, endpoints: Sequence[str]) -> Backend:
    """The keyspace ``prefix`` of the etcd members at ``endpoints``, called with
    the node's certificate."""
    tls = await asyncio.to_thread(client_ssl_context, paths.ca_cert, paths.client_pem)
    client = EtcdClient(endpoints, tls)
    try:
        await etcd_schema.upgrade(client, prefix)
    except BaseException:
        await client.close()
        raise
    config, jobs, kv, mastership = etcd_parts(client, prefix)
    return Backend(Stores(config, jobs, kv), mastership, client)


async def open_backend(paths: Paths, where: home.Home | None = None) -> Backend:
    """The stores where ``store-home.json`` says they are (or ``where``): no
    file or a SQLite home, the SQLite files (masterd opens them only on the
    node a SQLite home names: see corral.master.daemon)."""
    if where is None:
        where = await asyncio.to_thread(home.read, paths.store_home)
    if where is None or isinstance(where, home.SqliteHome):
        # An older cluster's files are upgraded here, off the event loop (the
        # stores' own check then finds them current).
        await asyncio.to_thread(schema.upgrade_files, sqlite_files(paths))
        return sqlite_backend(paths)
    return await etcd_backend(paths, where.prefix, where.endpoints)
