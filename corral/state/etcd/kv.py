"""The key-value store in etcd: one etcd key per state key.

A value's version is the etcd revision that wrote it (revisions grow with
every write of the cluster, as the ports ask).  Each stored value carries the
nonce of its write, so that a write sent again after a lost answer is known
as applied rather than taken for a conflict.  A delete leaves no value, so it
leaves a marker with its nonce under ``kv-deleted/``, on a lease that outlives
any repeat (the client gives up after its deadline): markers never pile up.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from corral.state.etcd import client as etcd
from corral.state.etcd.client import EtcdClient
from corral.state.etcd.keyspace import Keyspace, encode
from corral.state.ports import Versioned, version_conflict

_WHAT = "the master's state"
# Seconds a delete's marker lives: far beyond a repeat (client.CALL_DEADLINE).
MARK_TTL = 120


class EtcdKeyValueStore:
    """Versioned JSON values under string keys (see ports.KeyValueStore)."""

    def __init__(self, client: EtcdClient, prefix: str) -> None:
        self._space = Keyspace(client, prefix)
        self._kv = prefix + "kv/"
        self._marks = prefix + "kv-deleted/"
        self._lease: tuple[int, float] | None = None  # id, when to take a new one

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
        nonce = uuid.uuid4().hex
        full = self._kv + key
        result = await self._delete(full, self._marks + key, nonce, fence, expected)
        if result.succeeded:  # the marker before ours: a repeat of this delete?
            return result.deleted(1) > 0 or _writer(result.kvs(0)) == nonce
        if _writer(result.kvs(1)) == nonce:
            return True  # our own delete, sent again
        found = result.kvs(0)
        assert expected is not None
        raise version_conflict(key, found[0].mod_revision if found else 0, expected)

    async def _delete(
        self, full: str, mark: str, nonce: str, fence: int, expected: int | None
    ) -> etcd.TxnResult:
        """The delete's transaction: the old marker, the delete, the new marker
        (else the key and the marker as they are)."""

        async def attempt(lease: int) -> etcd.TxnResult:
            success = [
                etcd.get(mark),
                etcd.delete(full),
                etcd.put(mark, encode({"writer": nonce}), lease),
            ]
            failure = [etcd.get(full), etcd.get(mark)]
            return await self._space.write(fence, _WHAT, _expect(full, expected), success, failure)

        try:
            return await attempt(await self._mark_lease(fresh=False))
        except etcd.EtcdError as err:
            if "lease not found" not in str(err):
                raise
        return await attempt(await self._mark_lease(fresh=True))  # etcd lost the lease

    async def _mark_lease(self, fresh: bool) -> int:
        """The lease of delete markers: a new one every MARK_TTL / 2 seconds."""
        now = time.monotonic()
        if fresh or self._lease is None or now >= self._lease[1]:
            self._lease = (await self._space.client.grant(MARK_TTL), now + MARK_TTL / 2)
        return self._lease[0]

    async def close(self) -> None:
        """The client is the caller's: it stays open."""


def _expect(key: str, expected: int | None) -> list[dict[str, Any]]:
    # A missing key compares as revision 0: "expected 0" means "must not exist".
    return [] if expected is None else [etcd.compare(key, "MOD", "EQUAL", expected)]


def _writer(kvs: list[etcd.KeyValue]) -> str | None:
    """The nonce of the write that left ``kvs``' key (None: there is none)."""
    return json.loads(kvs[0].value).get("writer") if kvs else None


def _versioned(kv: etcd.KeyValue) -> Versioned:
    return Versioned(json.loads(kv.value)["value"], kv.mod_revision)
