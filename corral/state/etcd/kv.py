"""The key-value store in etcd: one etcd key per state key.

A value's version is the etcd revision that wrote it (revisions grow with
every write of the cluster, as the ports ask).  Each stored value carries the
nonce of its write, so that a write sent again after a lost answer is known
as applied rather than taken for a conflict.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from corral.state.etcd import client as etcd
from corral.state.etcd.client import EtcdClient
from corral.state.etcd.keyspace import Keyspace, encode
from corral.state.ports import Versioned, version_conflict

_WHAT = "the master's state"


class EtcdKeyValueStore:
    """Versioned JSON values under string keys (see ports.KeyValueStore)."""

    def __init__(self, client: EtcdClient, prefix: str) -> None:
        self._space = Keyspace(client, prefix)
        self._kv = prefix + "kv/"

    async def get(self, key: str) -> Versioned | None:
        kvs, _, _ = await self._space.client.range(self._kv + key)
        return _versioned(kvs[0]) if kvs else None

    async def scan(self, prefix: str) -> dict[str, Versioned]:
        kvs, _ = await self._space.client.scan(self._kv + prefix)
        return {kv.key[len(self._kv) :]: _versioned(kv) for kv in kvs}

    async def put(self, key: str, value: Any, fence: int, expected: int | None = None) -> int:
        nonce = uuid.uuid4().hex
        full = self._kv + key
        result = await self._space.write(
            fence,
            _WHAT,
            _expect(full, expected),
            [etcd.put(full, encode({"value": value, "writer": nonce}))],
            [etcd.get(full)],
        )
        if result.succeeded:
            return result.revision
        found = result.kvs(0)
        if found and json.loads(found[0].value).get("writer") == nonce:
            return found[0].mod_revision  # our own write, sent again
        assert expected is not None
        raise version_conflict(key, found[0].mod_revision if found else 0, expected)

    async def delete(self, key: str, fence: int, expected: int | None = None) -> bool:
        full = self._kv + key
        result = await self._space.write(
            fence, _WHAT, _expect(full, expected), [etcd.delete(full)], [etcd.get(full)]
        )
        if result.succeeded:
            return result.deleted(0) > 0
        found = result.kvs(0)
        assert expected is not None
        raise version_conflict(key, found[0].mod_revision if found else 0, expected)

    async def close(self) -> None:
        """The client is the caller's: it stays open."""


def _expect(key: str, expected: int | None) -> list[dict[str, Any]]:
    # A missing key compares as revision 0: "expected 0" means "must not exist".
    return [] if expected is None else [etcd.compare(key, "MOD", "EQUAL", expected)]


def _versioned(kv: etcd.KeyValue) -> Versioned:
    return Versioned(json.loads(kv.value)["value"], kv.mod_revision)
