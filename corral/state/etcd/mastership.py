"""The mastership in etcd: a key tied to an etcd lease, and a token counter.

The master key exists as long as its etcd lease runs: when the holder stops
renewing, etcd deletes it and another candidate may acquire.  Acquiring is
one transaction that compares what it read (no holder, or itself; the token
counter; the fence), writes the next token and the master key, and raises
the stores' fence to the new token: from then on every write of the former
holder is refused (FencedOut), whether or not it knows it was deposed.

A holder may acquire again while its own lease runs (a master daemon started
again on the same node): it gets a new token, and its former process is
fenced out as any former master is.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from typing import Any

from corral.state.etcd import client as etcd
from corral.state.etcd.client import EtcdClient, KeyValue
from corral.state.etcd.keyspace import Keyspace, encode
from corral.state.ports import Lease, LeaseLost

# Attempts at a transaction that lost a race with another candidate's.
_RACES = 5


# The key (under the cluster's prefix) of the last token given out.
TOKEN_COUNTER = "master/token"


class EtcdMastership:
    """Who may act as the master, for how long, with which token (see ports.Mastership)."""

    def __init__(self, client: EtcdClient, prefix: str) -> None:
        self._space = Keyspace(client, prefix)
        self._client = client
        self._master = prefix + "master/lease"
        self._counter = prefix + TOKEN_COUNTER
        self._handover = prefix + "master/handover"

    async def acquire(self, holder: str, ttl: float) -> Lease:
        for _ in range(_RACES):
            read = await self._space.read(
                etcd.get(self._master),
                etcd.get(self._counter),
                etcd.get(self._space.fence_key),
                etcd.get(self._handover),
            )
            current, counter, fence, handover = (read.kvs(i) for i in range(4))
            held = _lease(current[0]) if current else None
            retired = _retired_to(current)
            if retired is not None and retired != holder:
                raise LeaseLost(
                    f"The master's stores moved back to SQLite on {retired}: no other node"
                    " can take the mastership over until they move to etcd again (three"
                    " master candidates)"
                )
            if held is not None and held.holder != holder:
                raise LeaseLost(
                    f"The mastership is held by {held.holder} (token {held.token});"
                    " it passes on only when that lease ends"
                )
            wanted = _handover_to(handover)
            if wanted not in (None, holder):
                raise LeaseLost(f"The mastership is being handed over to {wanted}")
            token = max(_int(counter), _int(fence)) + 1
            lease = Lease(holder, token, time.time() + ttl)
            granted, nonce = math.ceil(ttl), uuid.uuid4().hex
            lease_id = await self._client.grant(granted)
            reads = self._read_keys(current, counter, fence, handover)
            result = await self._client.txn(
                [_unchanged(k, kvs) for k, kvs in reads],
                [
                    etcd.put(self._counter, str(token).encode()),
                    self._space.raise_fence(token),
                    etcd.put(self._master, _value(lease, lease_id, granted, nonce), lease_id),
                    *([etcd.delete(self._handover)] if handover else []),
                ],
                [etcd.get(self._master)],
            )
            if result.succeeded or _nonce(result.kvs(0)) == nonce:
                if current:
                    await self._client.revoke(_lease_id(current[0]))
                return lease
            await self._client.revoke(lease_id)
        raise LeaseLost(f"Other candidates kept taking the mastership from {holder}")

    async def carry_on(self, lease: Lease, ttl: float) -> Lease:
        """Hold here the mastership ``lease`` gave in another store, with its
        token (the stores moved to etcd under the same master: the nodes and
        the stores see the same master's token before and after).  Only in a
        keyspace no master ever used, else LeaseLost."""
        granted = math.ceil(ttl)
        lease_id = await self._client.grant(granted)
        carried = Lease(lease.holder, lease.token, time.time() + ttl)
        raw, value = str(lease.token).encode(), _value(carried, lease_id, granted, "carried")
        result = await self._client.txn(
            [etcd.compare(self._counter, "CREATE", "EQUAL", 0)],
            [
                etcd.put(self._counter, raw),
                self._space.raise_fence(lease.token),
                etcd.put(self._master, value, lease_id),
            ],
        )
        if not result.succeeded:
            await self._client.revoke(lease_id)
            raise LeaseLost(f"A master has held the mastership under {self._space.prefix} before")
        return carried

    async def retire(self, lease: Lease, to: str) -> None:
        """Keep the mastership ``lease`` holds for good (tied to no etcd lease,
        marked as moved to SQLite on node ``to``): the stores moved back to
        SQLite and no candidate may lead on what etcd still holds; LeaseLost if
        ``lease`` is no longer the current one.  A renewal of ``lease`` ties
        the key to its etcd lease again (a move back that failed after this)."""
        current = await self._held(lease)
        data = json.loads(current.value) | {"retired_to": to}
        result = await self._client.txn(
            [etcd.compare(self._master, "MOD", "EQUAL", current.mod_revision)],
            [etcd.put(self._master, encode(data))],
        )
        if not result.succeeded:
            raise LeaseLost(f"The mastership of {lease.holder} (token {lease.token}) changed")

    def _read_keys(self, *reads: list[KeyValue]) -> list[tuple[str, list[KeyValue]]]:
        keys = (self._master, self._counter, self._space.fence_key, self._handover)
        return list(zip(keys, reads, strict=True))

    # Standing by and handing over (see ports.HandOver)
    async def wait_released(self, timeout: float) -> None:
        read = await self._space.read(etcd.get(self._master), etcd.get(self._handover))
        if read.kvs(0) or read.kvs(1):  # else free now: no need to wait
            await self._client.watch(self._master, read.revision + 1, timeout)

    async def request(self, to: str, ttl: float) -> None:
        lease_id = await self._client.grant(math.ceil(ttl))
        await self._client.txn([], [etcd.put(self._handover, encode({"to": to}), lease_id)])

    async def wanted(self, holder: str, timeout: float) -> str | None:
        read = await self._space.read(etcd.get(self._handover))
        wanted = _handover_to(read.kvs(0))
        if wanted not in (None, holder):
            return wanted
        await self._client.watch(self._handover, read.revision + 1, timeout)
        wanted = _handover_to((await self._space.read(etcd.get(self._handover))).kvs(0))
        return wanted if wanted not in (None, holder) else None

    async def renew(self, lease: Lease, ttl: float) -> Lease:
        for _ in range(_RACES):
            current = await self._held(lease)
            data = json.loads(current.value)
            lease_id, granted = int(data["lease"]), math.ceil(ttl)
            started = time.time()  # etcd counts the new time to live from about now
            if granted == data["ttl"]:
                if await self._client.keepalive(lease_id) <= 0:
                    raise LeaseLost(
                        f"The mastership of {lease.holder} (token {lease.token}) ran out"
                    )
                new_id = lease_id
            else:  # another time to live: a new etcd lease carries the key
                new_id = await self._client.grant(granted)
            renewed = Lease(lease.holder, lease.token, started + ttl)
            result = await self._client.txn(
                [etcd.compare(self._master, "MOD", "EQUAL", current.mod_revision)],
                [etcd.put(self._master, _value(renewed, new_id, granted, data["writer"]), new_id)],
            )
            if result.succeeded:
                if new_id != lease_id:
                    await self._client.revoke(lease_id)
                return renewed
            if new_id != lease_id:
                await self._client.revoke(new_id)
        raise LeaseLost(f"The mastership of {lease.holder} (token {lease.token}) kept changing")

    async def _held(self, lease: Lease) -> KeyValue:
        """The master key if ``lease`` is the current one, else LeaseLost."""
        kvs, _, _ = await self._client.range(self._master)
        if not kvs or _lease(kvs[0]).token != lease.token:
            raise LeaseLost(
                f"The mastership of {lease.holder} (token {lease.token}) was taken over"
            )
        return kvs[0]

    async def release(self, lease: Lease) -> None:
        try:
            current = await self._held(lease)
        except LeaseLost:
            return
        result = await self._client.txn(
            [etcd.compare(self._master, "MOD", "EQUAL", current.mod_revision)],
            [etcd.delete(self._master)],
        )
        if result.succeeded:
            await self._client.revoke(_lease_id(current))

    async def current(self) -> Lease | None:
        kvs, _, _ = await self._client.range(self._master)
        return _lease(kvs[0]) if kvs else None

    async def close(self) -> None:
        """The client is the caller's: it stays open."""


def _value(lease: Lease, lease_id: int, ttl: int, nonce: str) -> bytes:
    return encode(
        {
            "holder": lease.holder,
            "token": lease.token,
            "expires": lease.expires,
            "lease": lease_id,
            "ttl": ttl,
            "writer": nonce,
        }
    )


def _lease(kv: KeyValue) -> Lease:
    data = json.loads(kv.value)
    return Lease(data["holder"], int(data["token"]), float(data["expires"]))


def _retired_to(kvs: list[KeyValue]) -> str | None:
    """The node the stores moved back to SQLite on (None: they did not)."""
    return json.loads(kvs[0].value).get("retired_to") if kvs else None


def _lease_id(kv: KeyValue) -> int:
    return int(json.loads(kv.value)["lease"])


def _nonce(kvs: list[KeyValue]) -> str | None:
    return str(json.loads(kvs[0].value)["writer"]) if kvs else None


def _int(kvs: list[KeyValue]) -> int:
    return int(kvs[0].value) if kvs else 0


def _unchanged(key: str, read: list[KeyValue]) -> dict[str, Any]:
    """The compare that holds while ``key`` is as it was read (0: it did not exist)."""
    return etcd.compare(key, "MOD", "EQUAL", read[0].mod_revision if read else 0)


def _handover_to(kvs: list[KeyValue]) -> str | None:
    """The candidate a hand-over was asked for (None: none was)."""
    return str(json.loads(kvs[0].value)["to"]) if kvs else None
