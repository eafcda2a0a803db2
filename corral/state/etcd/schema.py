"""Schema versions of the stores in etcd: a ``schema/<store>`` key each.

The configuration and the job queue have a layout of keys and record its
version (:mod:`corral.state.schema` holds the steps, one version numbering
for both backends); the key-value store holds the values it is given under
their own keys, with no layout of its own to version.  A keyspace's stores
are upgraded in one transaction, which holds only if no version key changed
since it was read: all or nothing, and never twice.  etcd keeps no backup
beside the data: take one with ``etcdctl snapshot save`` before upgrading.
"""

from __future__ import annotations

import logging
from typing import Any

from corral import errors
from corral.state import schema
from corral.state.etcd import client as etcd
from corral.state.etcd.client import EtcdClient

log = logging.getLogger(__name__)

# The stores whose layout is versioned in etcd.
STORES = (schema.CONFIG, schema.JOBS)


def version_key(prefix: str, store: str) -> str:
    """The key of ``store``'s schema version under the keyspace ``prefix``."""
    return f"{prefix}schema/{store}"


def stamp(prefix: str, store: str) -> dict[str, Any]:
    """The operation recording the current version of ``store``, written
    with the store's first content."""
    return etcd.put(version_key(prefix, store), str(schema.current(store)).encode())


async def upgrade(client: EtcdClient, prefix: str) -> list[tuple[str, int]]:
    """Bring the stores under ``prefix`` to the current versions, in one
    transaction; the stores upgraded, with the version each had.  Refused,
    with nothing written, if a store is newer."""
    keys = [version_key(prefix, store) for store in STORES]
    read = await client.txn([], [etcd.get(key) for key in keys])
    compares: list[dict[str, Any]] = []
    ops: list[dict[str, Any]] = []
    upgraded: list[tuple[str, int]] = []
    for index, (store, key) in enumerate(zip(STORES, keys, strict=True)):
        found_kvs = read.kvs(index)
        found = int(found_kvs[0].value) if found_kvs else 0
        revision = found_kvs[0].mod_revision if found_kvs else 0
        if found > schema.current(store):
            backup = "an etcd snapshot taken before the upgrade"
            raise schema.too_new(store, f"etcd key {key}", found, backup)
        compares.append(etcd.compare(key, "MOD", "EQUAL", revision))
        for version in range(found, schema.current(store)):
            ops += await schema.UPGRADES[store][version].etcd(client, prefix)
        if found < schema.current(store):
            ops.append(stamp(prefix, store))
            upgraded.append((store, found))
    if upgraded and not (await client.txn(compares, ops)).succeeded:
        raise errors.ConfigurationError(
            f"The schema versions under {prefix} changed while they were upgraded"
            " (another master?); start again"
        )
    for store, found in upgraded:
        log.warning(
            "Upgraded %s under %s from schema version %d to %d",
            schema.WHAT[store], prefix, found, schema.current(store),
        )  # fmt: skip
    return upgraded
