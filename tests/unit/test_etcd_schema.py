"""Schema versions of the stores in etcd, on a real etcd member: new stores
carry them, an unversioned keyspace is upgraded once, a newer one is refused
and a step that fails writes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import corral
from corral import errors
from corral.state import schema
from corral.state.etcd import client as etcd
from corral.state.etcd import schema as etcd_schema
from corral.state.etcd.config import EtcdConfigStore
from corral.state.etcd.jobs import EtcdJobStore
from corral.state.ports import ConfigChange
from tests.helpers.etcd import EtcdBed


@pytest.fixture
async def client(etcd_one: EtcdBed) -> AsyncIterator[etcd.EtcdClient]:
    made = etcd_one.client()
    try:
        yield made
    finally:
        await made.close()


async def _new_stores(client: etcd.EtcdClient, prefix: str) -> None:
    row = {"uuid": "c1", "name": "cluster.example.com", "serial_no": 1, "ctime": 1.0, "mtime": 1.0}
    await EtcdConfigStore.create(client, prefix, ConfigChange(upserts={"cluster": [row]}))
    await EtcdJobStore(client, prefix).copy_in([], [], 0, 1)


async def _versions(client: etcd.EtcdClient, prefix: str) -> dict[str, int | None]:
    found: dict[str, int | None] = {}
    for store in etcd_schema.STORES:
        kvs, _, _ = await client.range(etcd_schema.version_key(prefix, store))
        found[store] = int(kvs[0].value) if kvs else None
    return found


async def _everything(client: etcd.EtcdClient, prefix: str) -> list[tuple[str, bytes, int]]:
    kvs, _ = await client.scan(prefix)
    return [(kv.key, kv.value, kv.mod_revision) for kv in kvs]


async def test_new_stores_carry_the_current_versions(
    client: etcd.EtcdClient, etcd_one: EtcdBed
) -> None:
    prefix = etcd_one.prefix()
    await _new_stores(client, prefix)
    assert await _versions(client, prefix) == {
        store: schema.current(store) for store in etcd_schema.STORES
    }
    assert await etcd_schema.upgrade(client, prefix) == []


async def test_an_unversioned_keyspace_is_upgraded_once(
    client: etcd.EtcdClient, etcd_one: EtcdBed
) -> None:
    prefix = etcd_one.prefix()
    await _new_stores(client, prefix)
    for store in etcd_schema.STORES:
        await client.txn([], [etcd.delete(etcd_schema.version_key(prefix, store))])
    assert await etcd_schema.upgrade(client, prefix) == [(schema.CONFIG, 0), (schema.JOBS, 0)]
    assert await _versions(client, prefix) == {schema.CONFIG: 1, schema.JOBS: 1}
    once = await _everything(client, prefix)
    assert await etcd_schema.upgrade(client, prefix) == []
    assert await _everything(client, prefix) == once
    assert (await EtcdConfigStore(client, prefix).load()).serial == 1


async def test_a_newer_keyspace_is_refused_and_left_unchanged(
    client: etcd.EtcdClient, etcd_one: EtcdBed
) -> None:
    prefix = etcd_one.prefix()
    await _new_stores(client, prefix)
    await client.txn([], [etcd.delete(etcd_schema.version_key(prefix, schema.CONFIG))])
    await client.txn([], [etcd.put(etcd_schema.version_key(prefix, schema.JOBS), b"7")])
    before = await _everything(client, prefix)
    with pytest.raises(errors.ConfigVersionMismatch) as refused:
        await etcd_schema.upgrade(client, prefix)
    assert refused.value.message == (
        f"etcd key {prefix}schema/jobs holds the job queue at schema version 7, newer than"
        f" version {schema.current(schema.JOBS)} of Corral {corral.__version__}:"
        " run the newer Corral, or restore an etcd snapshot taken before the upgrade"
    )
    assert await _everything(client, prefix) == before


async def test_a_step_that_fails_writes_nothing(
    client: etcd.EtcdClient, etcd_one: EtcdBed, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def fails(client: etcd.EtcdClient, prefix: str) -> list[dict[str, Any]]:
        raise errors.ConfigurationError("injected failure")

    prefix = etcd_one.prefix()
    await _new_stores(client, prefix)
    for store in etcd_schema.STORES:
        await client.txn([], [etcd.delete(etcd_schema.version_key(prefix, store))])
    step = schema.UPGRADES[schema.JOBS][0]
    monkeypatch.setitem(schema.UPGRADES[schema.JOBS], 0, schema.Step(step.what, step.sqlite, fails))
    before = await _everything(client, prefix)
    with pytest.raises(errors.ConfigurationError, match="injected failure"):
        await etcd_schema.upgrade(client, prefix)
    assert await _everything(client, prefix) == before
