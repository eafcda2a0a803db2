"""masterd's small durable state, kept in the key-value port.

What lives here (the keys' prefixes): the queue's drain flag (``queue/``),
the watcher's pause (``watcher/``), the join tokens (``join-tokens/``) and
the records of operations under way (``intents/``).  masterd is the only
writer (its mastership lease fences every write), so the whole state is read
once at start and kept in memory: reads are answered from memory, writes go
to the store in the order they were made, each with the lease's fence token.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from corral.state.ports import NO_FENCE, KeyValueStore

log = logging.getLogger(__name__)

_MISSING: Any = object()

DRAINED = "queue/drained"
WATCHER_PAUSE = "watcher/paused-until"


class DurableState:
    """The key-value store as masterd reads and writes it."""

    def __init__(self, kv: KeyValueStore, values: dict[str, Any], fence: int) -> None:
        self.kv = kv
        self.fence = fence
        self._values = values
        # What the store holds: what clients are shown (a value whose write has
        # not ended may never be; a master that dies before would have shown
        # what its successor does not have).
        self._committed = dict(values)
        self._tail: asyncio.Future[None] | None = None

    @classmethod
    async def open(cls, kv: KeyValueStore, fence: int = NO_FENCE) -> DurableState:
        """Read the whole state (it is small) to serve it from memory."""
        values = {key: item.value for key, item in (await kv.scan("")).items()}
        return cls(kv, values, fence)

    def get(self, key: str, default: Any = None) -> Any:
        """The value as masterd's own checks see it: with the writes under way."""
        return self._values.get(key, default)

    def committed(self, key: str, default: Any = None) -> Any:
        """The value the store holds: what a client may be shown."""
        return self._committed.get(key, default)

    def scan(self, prefix: str) -> dict[str, Any]:
        """Every key that starts with ``prefix``, in key order."""
        return {k: v for k, v in sorted(self._values.items()) if k.startswith(prefix)}

    async def put(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key``: in memory at once (a check and this
        change are one step for other tasks), durable when this returns."""
        await self._change(key, value, self._writer(key, value))

    async def delete(self, key: str) -> None:
        """Remove ``key``; returns once that is durable."""
        await self._change(key, _MISSING, self._writer(key, _MISSING))

    def _writer(self, key: str, value: Any) -> Callable[[], Awaitable[object]]:
        """The write of ``value`` (_MISSING: the removal) of ``key``, which
        makes it committed once the store holds it."""

        async def write() -> None:
            if value is _MISSING:
                await self.kv.delete(key, self.fence)
                self._committed.pop(key, None)
            else:
                await self.kv.put(key, value, self.fence)
                self._committed[key] = value

        return write

    async def _change(self, key: str, value: Any, write: Callable[[], Awaitable[object]]) -> None:
        old = self._values.get(key, _MISSING)
        self._set(key, value)

        def undo_if_failed(done: asyncio.Future[None]) -> None:
            failed = done.cancelled() or done.exception() is not None
            if failed and self._values.get(key, _MISSING) is value:  # nobody changed it since
                self._set(key, old)

        written = self._ordered(write)
        written.add_done_callback(undo_if_failed)
        # A caller that goes (its luxi client left, masterd stops) leaves the
        # write to end: the writes after it wait for it.
        await asyncio.shield(written)

    def _set(self, key: str, value: Any) -> None:
        if value is _MISSING:
            self._values.pop(key, None)
        else:
            self._values[key] = value

    def forget(self, key: str) -> None:
        """Remove ``key`` now, from synchronous code: gone from memory at once,
        from the store soon (in order with every other write)."""
        if self._values.pop(key, None) is not None:
            task = asyncio.ensure_future(self._ordered(self._writer(key, _MISSING)))
            task.add_done_callback(_log_failure)

    def _ordered(self, write: Callable[[], Awaitable[object]]) -> asyncio.Future[None]:
        """Run ``write`` after every write asked for before it."""
        previous = self._tail

        async def run() -> None:
            if previous is not None:
                await asyncio.wait([previous])  # however it ended: its failure is its caller's
            await write()

        self._tail = asyncio.ensure_future(run())
        return self._tail

    async def flush(self) -> None:
        """Wait for the writes asked for so far (a failed one is logged)."""
        if self._tail is not None:
            await asyncio.wait([self._tail])

    async def close(self) -> None:
        """Wait for the writes under way, then close the store."""
        await self.flush()
        await self.kv.close()


def _log_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("Cannot write masterd's durable state: %s", task.exception())
