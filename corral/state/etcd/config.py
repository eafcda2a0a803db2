"""The configuration in etcd: one key per object, the cluster serial, a log of changes.

A commit is one transaction that compares the fence (the mastership's
token: see ``keyspace``) and the cluster serial it was based on, and writes
the objects, the change (kept for followers) and the new serial.  Since the
serial is compared, what the commit checks before (each object's serial as
the change read it, names unique per table) is checked against an index of
the store at that very serial, which the store keeps: names and serials of
every object, caught up from the log of changes when another process wrote.

A group (``commit_many``) goes in one transaction when it fits etcd's
request limits, else in several, each holding whole changes.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from corral import constants as C
from corral import errors
from corral.state import schema
from corral.state.etcd import client as etcd
from corral.state.etcd import schema as etcd_schema
from corral.state.etcd.client import EtcdClient, EtcdError
from corral.state.etcd.keyspace import Keyspace, TooLarge, batches, encode, pad
from corral.state.ports import (
    ChangesExpired,
    ConfigChange,
    ConfigSnapshot,
    Conflict,
    FencedOut,
    SerialChange,
    commit_one,
    object_conflict,
    serial_conflict,
)
from corral.state.sqlite.config import KEPT_CHANGES, TABLES

_WHAT = "the configuration"


# Keys under the cluster's prefix: the cluster serial, and the objects by table.
SERIAL_KEY = "config/serial"
OBJECTS = "config/objects/"


class _Index:
    """Name and serial of every object, per table, at one cluster serial."""

    def __init__(self, serial: int, tables: dict[str, list[dict[str, Any]]]) -> None:
        self.serial = serial
        self.objects: dict[str, dict[str, tuple[str, int]]] = {t: {} for t in TABLES}
        self.names: dict[str, dict[str, str]] = {t: {} for t in TABLES}
        for table, rows in tables.items():
            for row in rows:
                self._set(table, row["uuid"], row["name"], row["serial_no"])

    def _set(self, table: str, uuid_: str, name: str, serial: int) -> None:
        self.objects[table][uuid_] = (name, serial)
        self.names[table][name] = uuid_

    def _drop(self, table: str, uuid_: str) -> tuple[str, int] | None:
        old = self.objects[table].pop(uuid_, None)
        if old is not None:
            self.names[table].pop(old[0], None)
        return old

    def check(self, change: ConfigChange) -> None:
        """Conflict unless ``change`` holds against the index."""
        for table, serials in change.expected.items():
            for uuid_, wanted in serials.items():
                found = self.objects[table].get(uuid_)
                name, serial = found if found is not None else (uuid_, None)
                if serial != wanted:
                    raise object_conflict(table, name, serial, wanted)
        for table, rows in change.upserts.items():
            deleted = set(change.deletes.get(table, ()))
            for row in rows:
                holder = self.names[table].get(row["name"])
                if holder not in (None, row["uuid"]) and holder not in deleted:
                    raise Conflict(
                        f"Configuration object name taken: {table} '{row['name']}'"
                        f" is the name of {holder}"
                    )

    def apply(self, change: ConfigChange) -> list[tuple[str, str, tuple[str, int] | None]]:
        """Apply ``change`` (one serial more); what undoes it."""
        undo: list[tuple[str, str, tuple[str, int] | None]] = []
        for table, uuids in change.deletes.items():
            undo += [(table, u, self._drop(table, u)) for u in uuids]
        for table, rows in change.upserts.items():
            for row in rows:
                undo.append((table, row["uuid"], self._drop(table, row["uuid"])))
                self._set(table, row["uuid"], row["name"], row["serial_no"])
        self.serial += 1
        return undo

    def undo(self, undo: list[tuple[str, str, tuple[str, int] | None]]) -> None:
        for table, uuid_, old in reversed(undo):
            self._drop(table, uuid_)
            if old is not None:
                self._set(table, uuid_, *old)
        self.serial -= 1


class EtcdConfigStore:
    """The configuration store of a cluster with master candidates."""

    def __init__(self, client: EtcdClient, prefix: str, kept_changes: int = KEPT_CHANGES) -> None:
        self._space = Keyspace(client, prefix)
        self._client = client
        self._kept = kept_changes
        self._serial_key = prefix + SERIAL_KEY
        self._version_key = prefix + "config/version"
        self._objects = prefix + OBJECTS
        self._changes = prefix + "config/changes/"
        self._index: _Index | None = None

    @classmethod
    async def create(cls, client: EtcdClient, prefix: str, change: ConfigChange) -> None:
        """Write a new configuration holding ``change`` as serial 1."""
        store = cls(client, prefix)
        ops = [etcd.put(store._version_key, str(C.CONFIG_VERSION).encode())]
        ops.append(etcd_schema.stamp(prefix, schema.CONFIG))
        ops += store._change_ops(change, 1, "create")
        ops.append(etcd.put(store._serial_key, b"1"))
        result = await client.txn([etcd.compare(store._serial_key, "CREATE", "EQUAL", 0)], ops)
        if not result.succeeded:
            raise errors.ConfigurationError(f"A configuration exists already under {prefix}")

    async def copy_in(self, snapshot: ConfigSnapshot, fence: int) -> None:
        """Write ``snapshot``, read from another store, into this keyspace,
        which holds no configuration yet: its cluster serial is kept and no
        change before it is (a follower behind loads the whole configuration)."""
        absent = [etcd.compare(self._serial_key, "CREATE", "EQUAL", 0)]
        puts = [
            [etcd.put(self._object(table, row["uuid"]), encode(row))]
            for table, rows in snapshot.tables.items()
            for row in rows
        ]
        last = [
            etcd.put(self._version_key, str(C.CONFIG_VERSION).encode()),
            etcd_schema.stamp(self._space.prefix, schema.CONFIG),
            etcd.put(self._serial_key, str(snapshot.serial).encode()),
        ]
        for group in [*batches(puts), None]:
            ops = last if group is None else [puts[i][0] for i in group]
            if not (await self._space.write(fence, _WHAT, absent, ops)).succeeded:
                raise errors.ConfigurationError(
                    f"A configuration exists already under {self._space.prefix}"
                )

    async def load(self) -> ConfigSnapshot:
        kvs, revision = await self._client.scan(self._objects)
        meta = await self._client.txn(
            [],
            [_at(etcd.get(self._version_key), revision), _at(etcd.get(self._serial_key), revision)],
        )
        version = int(meta.kvs(0)[0].value) if meta.kvs(0) else 0
        if version != C.CONFIG_VERSION:
            raise errors.ConfigVersionMismatch(
                f"Configuration version {version} is not the supported {C.CONFIG_VERSION}"
            )
        tables: dict[str, list[dict[str, Any]]] = {table: [] for table in TABLES}
        for kv in kvs:
            table = kv.key[len(self._objects) :].split("/", 1)[0]
            tables[table].append(json.loads(kv.value))
        snapshot = ConfigSnapshot(int(meta.kvs(1)[0].value), tables)
        self._index = _Index(snapshot.serial, tables)
        return snapshot

    async def commit(self, change: ConfigChange, serial: int, fence: int) -> None:
        await commit_one(self, change, serial, fence)

    async def commit_many(
        self, changes: Sequence[ConfigChange], serial: int, fence: int
    ) -> list[Exception | None]:
        try:
            return await self._commit_many(changes, serial, fence)
        except (FencedOut, Conflict):
            raise
        except EtcdError as err:
            self._index = None  # what was written is not known: read it again
            raise errors.OpExecError(
                f"Cannot write the configuration: {err.message}", C.ECODE_ENVIRON
            ) from err
        except BaseException:
            self._index = None  # it may hold changes that were not written
            raise

    async def _commit_many(
        self, changes: Sequence[ConfigChange], serial: int, fence: int
    ) -> list[Exception | None]:
        index = await self._index_at(serial - 1)
        if index.serial != serial - 1:
            refusal = serial_conflict(index.serial, serial - 1)
            return [refusal for _ in changes]
        refusals: list[Exception | None] = [None] * len(changes)
        taken: list[tuple[int, list[dict[str, Any]], list[Any]]] = []  # (position, ops, undo)
        nonce = uuid.uuid4().hex
        for position, change in enumerate(changes):
            try:
                index.check(change)
                ops = self._change_ops(change, index.serial + 1, nonce)
                next(batches([ops]))  # TooLarge if it can never fit
            except (Conflict, TooLarge) as err:
                refusals[position] = err
                continue
            taken.append((position, ops, index.apply(change)))
        base = serial
        for group in batches([ops for _, ops, _ in taken]):
            chunk = [taken[i] for i in group]
            try:
                await self._write(chunk, base, fence, nonce)
            except Exception as err:
                for _, _, undo in reversed(taken[group[0] :]):
                    index.undo(undo)
                if group[0] == 0 and not isinstance(err, Conflict):
                    raise  # nothing was written: all refused
                for position, _, _ in taken[group[0] :]:
                    refusals[position] = err
                break
            base += len(chunk)
        return refusals

    async def _write(
        self,
        chunk: list[tuple[int, list[dict[str, Any]], list[Any]]],
        base: int,
        fence: int,
        nonce: str,
    ) -> None:
        """One transaction: the changes of ``chunk`` as serials ``base`` on."""
        last = base + len(chunk) - 1
        ops = [op for _, change_ops, _ in chunk for op in change_ops]
        ops.append(etcd.put(self._serial_key, str(last).encode()))
        ops.append(
            etcd.delete_range(self._changes, self._changes + pad(max(0, last + 1 - self._kept)))
        )
        result = await self._space.write(
            fence,
            _WHAT,
            [etcd.compare(self._serial_key, "VALUE", "EQUAL", str(base - 1).encode())],
            ops,
            [etcd.get(self._serial_key), etcd.get(self._changes + pad(last))],
        )
        if result.succeeded:
            return
        written = result.kvs(1)
        if written and json.loads(written[0].value).get("writer") == nonce:
            return  # our own write, sent again after its answer was lost
        self._index = None
        stored = int(result.kvs(0)[0].value) if result.kvs(0) else 0
        raise serial_conflict(stored, base - 1)

    def _change_ops(self, change: ConfigChange, serial: int, nonce: str) -> list[dict[str, Any]]:
        ops = [
            etcd.delete(self._object(t, u)) for t, uuids in change.deletes.items() for u in uuids
        ]
        ops += [
            etcd.put(self._object(table, row["uuid"]), encode(row))
            for table, rows in change.upserts.items()
            for row in rows
        ]
        record = asdict(change) | {"writer": nonce}
        ops.append(etcd.put(self._changes + pad(serial), encode(record)))
        return ops

    def _object(self, table: str, uuid_: str) -> str:
        if table not in TABLES:
            raise errors.ProgrammerError(f"Unknown configuration table {table!r}")
        return f"{self._objects}{table}/{uuid_}"

    async def _index_at(self, serial: int) -> _Index:
        """The index, caught up with the store (at ``serial`` if the store is)."""
        if self._index is None or self._index.serial != serial:
            try:
                if self._index is None:
                    raise ChangesExpired("no index yet")
                for found in await self._read_changes(self._index.serial):
                    self._index.apply(found.change)
            except ChangesExpired:
                await self.load()
        assert self._index is not None
        return self._index

    async def changes(self, since: int, timeout: float) -> list[SerialChange]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            found, revision = await self._changes_after(since)
            if found or loop.time() >= deadline:
                return found
            if not await self._client.watch(self._serial_key, revision + 1, deadline - loop.time()):
                return []

    async def _read_changes(self, since: int) -> list[SerialChange]:
        return (await self._changes_after(since))[0]

    async def _changes_after(self, since: int) -> tuple[list[SerialChange], int]:
        """The kept changes after ``since`` and the revision they were read at."""
        read = await self._space.read(
            etcd.get(self._serial_key),
            etcd.get_range(self._changes + pad(since + 1), self._changes),
        )
        latest = int(read.kvs(0)[0].value) if read.kvs(0) else 0
        found = []
        for kv in read.kvs(1):
            record = json.loads(kv.value)
            record.pop("writer", None)
            found.append(SerialChange(int(kv.key[len(self._changes) :]), ConfigChange(**record)))
        first = found[0].serial if found else latest + 1
        if since < latest and first != since + 1:
            raise ChangesExpired(
                f"The configuration changes after serial {since} are no longer kept"
                f" (the oldest kept is {first}); load the configuration again"
            )
        return found, read.revision

    async def close(self) -> None:
        """The client is the caller's: it stays open."""


def _at(op: dict[str, Any], revision: int) -> dict[str, Any]:
    """A range operation that reads at ``revision``."""
    op["request_range"]["revision"] = str(revision)
    return op
