"""The disk stream's checksum, and its pipelining: the disk I/O (with the
checksum, in worker threads: both release the GIL) runs while the TLS work
on the event loop does, a few chunks apart, instead of in turn.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any, TypeVar

import xxhash

# Chunks a stage may run ahead of the next one.
DEPTH = 3

_END = object()
Chunk = TypeVar("Chunk", bytes, bytes | memoryview)
T = TypeVar("T")


class Checksum:
    """The end-to-end check of a disk sent: its XXH3-128 hash, and its length.

    TLS already authenticates every byte on the wire; what the check guards is
    the chunk pipeline on both ends (a chunk lost, doubled or out of order).
    A non-cryptographic hash does that, at about 20 GB/s: the copy shares the
    nodes' CPUs with the TLS work, and a cryptographic hash on each side
    (SHA-256, blake2b) cost a quarter of the copy's speed.
    """

    def __init__(self) -> None:
        self._hash = xxhash.xxh3_128()
        self.length = 0

    def update(self, data: bytes | memoryview) -> None:
        self._hash.update(data)
        self.length += len(data)

    def hexdigest(self) -> str:
        return f"xxh3-128:{self._hash.hexdigest()}:{self.length}"


def new_digest() -> Checksum:
    """A fresh :class:`Checksum`."""
    return Checksum()


async def prefetch(chunks: AsyncIterable[Chunk], depth: int = DEPTH) -> AsyncIterator[Chunk]:
    """``chunks``, pulled by a task of its own up to ``depth`` chunks ahead."""
    queue: asyncio.Queue[Any] = asyncio.Queue(depth)

    async def pump() -> None:
        try:
            async for chunk in chunks:
                await queue.put(chunk)
            await queue.put(_END)
        except Exception as err:  # handed to the consumer, which raises it
            await queue.put(err)
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()

    task = asyncio.create_task(pump())
    try:
        while (item := await queue.get()) is not _END:
            if isinstance(item, Exception):
                raise item
            yield item
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def hashed(chunks: AsyncIterable[bytes], digest: Checksum) -> AsyncIterator[bytes]:
    """``chunks``, each added to ``digest`` (in a worker thread) before it is passed on."""
    async for chunk in chunks:
        await asyncio.to_thread(digest.update, chunk)
        yield chunk


def in_own_thread(func: Callable[[], None], name: str) -> asyncio.Future[None]:
    """Start ``func()`` in a new thread; a future of its end (its exception, if any).

    For a job that lasts the whole copy: it would hold one of the default
    executor's few workers all along.  Cancelling the future does not stop
    the thread: wait for it with ``asyncio.wait``, which never cancels.
    """
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = loop.create_future()

    def settle(err: BaseException | None) -> None:
        if ended.done():
            return
        if err is None:
            ended.set_result(None)
        else:
            ended.set_exception(err)

    def run() -> None:
        try:
            func()
        except BaseException as err:  # handed to whoever awaits the future
            loop.call_soon_threadsafe(settle, err)
        else:
            loop.call_soon_threadsafe(settle, None)

    threading.Thread(target=run, name=name, daemon=True).start()
    return ended


async def in_thread(func: Callable[..., T], *args: Any) -> T:
    """``func(*args)`` in a worker thread.  Cancelled, it still waits for the
    thread to end before it lets the cancellation through: the thread may be
    using a descriptor or a buffer that the caller closes next."""
    future = asyncio.ensure_future(asyncio.to_thread(func, *args))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        await asyncio.gather(future, return_exceptions=True)
        raise
