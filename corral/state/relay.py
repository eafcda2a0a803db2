"""masterd's stores behind relays, so that they can move while masterd runs.

masterd's parts (the config manager, the job queue, the durable state) hold
a relay of each store, never the store itself.  A relay passes every call on
to the store in force, holding the :class:`Gate` shared while the call runs.
Moving the stores (``corral.services.store_move``) holds the gate alone: the
calls under way end first, the calls that come meanwhile wait, and they go
to the new stores once the move put them in place.  Nobody's call fails and
nobody sees a half-moved state.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from corral.state.ports import (
    ConfigChange,
    ConfigSnapshot,
    ConfigStore,
    JobStore,
    KeyValueStore,
    LogEntryRow,
    LogRow,
    SerialChange,
    Versioned,
)


class Gate:
    """Many calls at once, or one move alone (a readers-writer lock whose
    writer, once waiting, goes before the readers that come after it)."""

    def __init__(self) -> None:
        self._calls = 0
        self._moving = False
        self._changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def call(self) -> AsyncIterator[None]:
        """Held while one call runs."""
        async with self._changed:
            await self._changed.wait_for(lambda: not self._moving)
            self._calls += 1
        try:
            yield
        finally:
            async with self._changed:
                self._calls -= 1
                self._changed.notify_all()

    @contextlib.asynccontextmanager
    async def move(self) -> AsyncIterator[None]:
        """Held alone: no call runs until it is let go."""
        async with self._changed:
            await self._changed.wait_for(lambda: not self._moving)
            self._moving = True  # calls that come from now on wait
            await self._changed.wait_for(lambda: self._calls == 0)
        try:
            yield
        finally:
            async with self._changed:
                self._moving = False
                self._changed.notify_all()


class ConfigRelay:
    """The configuration store in force (see ports.ConfigStore)."""

    def __init__(self, gate: Gate, store: ConfigStore) -> None:
        self.gate = gate
        self.store = store

    async def load(self) -> ConfigSnapshot:
        async with self.gate.call():
            return await self.store.load()

    async def commit(self, change: ConfigChange, serial: int, fence: int) -> None:
        async with self.gate.call():
            await self.store.commit(change, serial, fence)

    async def commit_many(
        self, changes: Sequence[ConfigChange], serial: int, fence: int
    ) -> list[Exception | None]:
        async with self.gate.call():
            return await self.store.commit_many(changes, serial, fence)

    async def changes(self, since: int, timeout: float) -> list[SerialChange]:
        async with self.gate.call():
            return await self.store.changes(since, timeout)

    async def close(self) -> None:
        await self.store.close()


class JobRelay:
    """The job store in force (see ports.JobStore)."""

    def __init__(self, gate: Gate, store: JobStore) -> None:
        self.gate = gate
        self.store = store

    async def insert_new(
        self, count: int, build: Callable[[list[int]], list[dict[str, Any]]], fence: int
    ) -> list[dict[str, Any]]:
        async with self.gate.call():
            return await self.store.insert_new(count, build, fence)

    async def write_batch(
        self, rows: Sequence[dict[str, Any]], logs: Sequence[LogRow], fence: int
    ) -> None:
        async with self.gate.call():
            await self.store.write_batch(rows, logs, fence)

    async def archive(self, job_ids: Sequence[int], fence: int) -> int:
        async with self.gate.call():
            return await self.store.archive(job_ids, fence)

    async def last_id(self) -> int:
        async with self.gate.call():
            return await self.store.last_id()

    async def fetch(
        self, job_ids: Sequence[int] | None, columns: Sequence[str], archived: bool = False
    ) -> list[dict[str, Any]]:
        async with self.gate.call():
            return await self.store.fetch(job_ids, columns, archived)

    async def fetch_logs(
        self, job_id: int, after: int = 0, archived: bool = False
    ) -> list[LogEntryRow]:
        async with self.gate.call():
            return await self.store.fetch_logs(job_id, after, archived)

    async def unfinished_ids(self) -> list[int]:
        async with self.gate.call():
            return await self.store.unfinished_ids()

    async def finished_before(self, timestamp: float | None) -> list[int]:
        async with self.gate.call():
            return await self.store.finished_before(timestamp)

    async def close(self) -> None:
        await self.store.close()


class KeyValueRelay:
    """The key-value store in force (see ports.KeyValueStore)."""

    def __init__(self, gate: Gate, store: KeyValueStore) -> None:
        self.gate = gate
        self.store = store

    async def get(self, key: str) -> Versioned | None:
        async with self.gate.call():
            return await self.store.get(key)

    async def scan(self, prefix: str) -> dict[str, Versioned]:
        async with self.gate.call():
            return await self.store.scan(prefix)

    async def put(self, key: str, value: Any, fence: int, expected: int | None = None) -> int:
        async with self.gate.call():
            return await self.store.put(key, value, fence, expected)

    async def delete(self, key: str, fence: int, expected: int | None = None) -> bool:
        async with self.gate.call():
            return await self.store.delete(key, fence, expected)

    async def close(self) -> None:
        await self.store.close()


@dataclass
class Stores:
    """The three stores of one backend."""

    config: ConfigStore
    jobs: JobStore
    kv: KeyValueStore

    async def close(self) -> None:
        await self.config.close()
        await self.jobs.close()
        await self.kv.close()


class Relays:
    """masterd's relays of its three stores, behind one gate."""

    def __init__(self, stores: Stores) -> None:
        self.gate = Gate()
        self.config = ConfigRelay(self.gate, stores.config)
        self.jobs = JobRelay(self.gate, stores.jobs)
        self.kv = KeyValueRelay(self.gate, stores.kv)

    @property
    def stores(self) -> Stores:
        """The stores in force."""
        return Stores(self.config.store, self.jobs.store, self.kv.store)

    def put_in_place(self, stores: Stores) -> None:
        """Make ``stores`` the stores in force (with the gate held by a move)."""
        self.config.store, self.jobs.store, self.kv.store = stores.config, stores.jobs, stores.kv
