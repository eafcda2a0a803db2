"""Reading and writing a disk for a copy between nodes, with direct I/O.

A copy reads a whole disk once and writes it once, and nobody reads either
soon: through the page cache the writes are throttled behind dirty-page
write-back (the final fsync waits for all of it) and a disk not in the cache
is read in small read-ahead steps.  On the benchmark machine that made a
1 GiB move run at a fifth of the plain TLS copy's speed.  So both ends use
``O_DIRECT`` with one page-aligned buffer, a chunk per system call, and each
chunk's checksum is taken in the same worker-thread step as its I/O.

The path comes from the disk's template (``attach``, which refuses any path
the template may not touch), as do its rules: the data must fit the disk,
and a template whose disks are fresh sparse files skips runs of zeros.
Where the file system refuses direct I/O the template's own ``read_stream``
and ``write_stream`` do the I/O.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import itertools
import mmap
import os
import queue
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from corral import errors
from corral.node.storage.base import CHUNK, NodeTemplate
from corral.node.transfer_stream import Checksum, hashed, in_own_thread, in_thread, prefetch
from corral.storage.disk import DiskDescription

# O_DIRECT needs offsets, lengths and the buffer aligned to the device's block.
ALIGN = 4096
# Read buffers, and how many chunks behind the reader thread the consumer
# may be (the one being sent, one in the connection, spares).
RING = 8
LAG = 3
# Write buffers: the one being filled, the one being written, spares that
# absorb the jitter between the connection and the disk.
BUFFERS = 6
_ZEROS = bytes(CHUNK)


def _open_direct(path: Path, flags: int) -> int | None:
    """A direct-I/O descriptor of ``path``, or None if its file system has none."""
    try:
        return os.open(path, flags | os.O_DIRECT | os.O_CLOEXEC)
    except OSError as err:
        if err.errno == errno.EINVAL:
            return None
        raise errors.OpExecError(f"Cannot open disk {path}: {err.strerror}") from None


def _io_error(path: Path, doing: str, err: OSError) -> errors.OpExecError:
    return errors.OpExecError(f"Cannot {doing} disk {path}: {err.strerror}")


class _Direct:
    """One disk open for direct I/O, at an offset; for reads also through the
    page cache (``cached``), used for what the cache holds already."""

    def __init__(self, fd: int, path: Path, cached: int | None = None) -> None:
        self.fd, self.path, self.cached = fd, path, cached
        self.offset = 0

    def _from_cache(self, view: memoryview, size: int) -> bool:
        """Whether the page cache held the next ``size`` bytes (read into ``view``)."""
        if self.cached is None:
            return False
        try:
            if os.preadv(self.cached, [view[:size]], self.offset, os.RWF_NOWAIT) == size:
                return True
        except BlockingIOError:
            pass
        # Not in the cache: the rest of the disk is read from the device only
        # (asking the cache again could make it read ahead what we read too).
        os.close(self.cached)
        self.cached = None
        return False

    def read(self, buffer: mmap.mmap, size: int, checksum: Checksum) -> memoryview:
        """The next ``size`` bytes (a block multiple, or the disk's tail), read
        into ``buffer``: from the page cache if it has them all, else from the
        device (a disk being copied is read once, not kept in the cache)."""
        view = memoryview(buffer)[: -(-size // ALIGN) * ALIGN]
        try:
            got = size if self._from_cache(view, size) else os.preadv(self.fd, [view], self.offset)
        except OSError as err:
            raise _io_error(self.path, "read", err) from None
        if got < size:
            raise errors.OpExecError(f"Disk {self.path} shrank while being read")
        checksum.update(view[:size])
        self.offset += size
        return view[:size]

    def write_view(self, view: memoryview) -> None:
        """Write the aligned ``view`` (a whole number of blocks) at the current offset."""
        try:
            os.pwrite(self.fd, view, self.offset)
        except OSError as err:
            raise _io_error(self.path, "write", err) from None

    def write_buffered(self, data: bytes) -> None:
        """Write ``data`` (the disk's tail, not a whole block) at the current offset."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.pwrite(fd, data, self.offset)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as err:
            raise _io_error(self.path, "write", err) from None

    def close(self) -> None:
        os.close(self.fd)
        if self.cached is not None:
            os.close(self.cached)


class _Reader:
    """Reads a disk ahead into a ring of buffers in a thread of its own, which
    hands each chunk to the event loop with ``call_soon_threadsafe``: the disk
    never waits for the event loop (busy with the TLS work) between reads."""

    def __init__(self, direct: _Direct, size: int, checksum: Checksum) -> None:
        self.direct, self.size, self.checksum = direct, size, checksum
        self.ring = [mmap.mmap(-1, CHUNK) for _ in range(RING)]
        # Chunks the thread may read before the consumer asks for more: a
        # buffer is read again only LAG chunks after the consumer came back
        # from it (the connection is done with a chunk once it takes the next).
        self.slots = threading.Semaphore(RING - LAG)
        # Chunks read; then None at the end, or the error that stopped the thread.
        self.ready: asyncio.Queue[memoryview | Exception | None] = asyncio.Queue()
        self.stopped = False

    def read_all(self, loop: asyncio.AbstractEventLoop) -> None:
        """In the reader thread: read every chunk (until stopped)."""
        try:
            for index in itertools.count():
                if self.direct.offset >= self.size:
                    break
                self.slots.acquire()
                if self.stopped:
                    return
                step = min(CHUNK, self.size - self.direct.offset)
                view = self.direct.read(self.ring[index % RING], step, self.checksum)
                loop.call_soon_threadsafe(self.ready.put_nowait, view)
        except Exception as err:  # handed to the consumer, which raises it
            loop.call_soon_threadsafe(self.ready.put_nowait, err)
        else:
            loop.call_soon_threadsafe(self.ready.put_nowait, None)

    def stop(self) -> None:
        """Make the reader thread end after its current read."""
        self.stopped = True
        self.slots.release()


async def read_disk(
    template: NodeTemplate, disk: DiskDescription, checksum: Checksum
) -> AsyncIterator[bytes | memoryview]:
    """The disk's content chunk by chunk, each added to ``checksum``.

    A chunk is a view of one of a ring of buffers (see :class:`_Reader`):
    no copy is made of the data read.
    """
    path = template.attach(disk)
    size = await asyncio.to_thread(template.size, disk)
    fd = _open_direct(path, os.O_RDONLY)  # quick, and no descriptor lost to a cancel
    if fd is None:
        async for chunk in prefetch(hashed(template.read_stream(disk), checksum)):
            yield chunk
        return
    try:
        cached = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as err:
        os.close(fd)
        raise _io_error(path, "open", err) from None
    direct = _Direct(fd, path, cached)
    reader = _Reader(direct, size, checksum)
    loop = asyncio.get_running_loop()
    thread = in_own_thread(lambda: reader.read_all(loop), f"read {path.name}")
    try:
        while (item := await reader.ready.get()) is not None:
            if isinstance(item, Exception):
                raise item
            yield item
            reader.slots.release()
    finally:
        reader.stop()
        # The thread may be reading into the ring with the descriptor: it ends
        # first (after its current read); wait() does not cancel it.  The ring
        # is left to the garbage collector: the connection may hold a view of it.
        await asyncio.wait([thread])
        direct.close()


# Reads the next piece of a request body: b"" at its end.
ReadSome = Callable[[], Awaitable[bytes]]
# Part of a piece: the bytes, where the part starts in them, its length.
_Piece = tuple[bytes, int, int]


def _address(data: bytes) -> int:
    """Where the content of ``data`` lies in memory (valid while it is referenced)."""
    return ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value or 0


async def _pieces(read_some: ReadSome, length: int) -> AsyncIterator[bytes]:
    """The body's pieces as they arrive; OpExecError if it ends short."""
    remaining = length
    while remaining > 0:
        piece = await read_some()
        if not piece:
            raise errors.OpExecError(
                f"The sender stopped after {length - remaining} of {length} bytes"
            )
        remaining -= len(piece)
        yield piece
    if remaining < 0:
        raise errors.OpExecError(f"The sender sent more than the {length} bytes announced")


async def _chunks(read_some: ReadSome, length: int) -> AsyncIterator[bytes]:
    """The body in CHUNK-sized pieces (for the template's own ``write_stream``)."""
    pending = bytearray()
    async for piece in _pieces(read_some, length):
        pending += piece
        while len(pending) >= CHUNK:
            yield bytes(pending[:CHUNK])
            del pending[:CHUNK]
    if pending:
        yield bytes(pending)


class _Receiver:
    """Gathers the body's pieces into chunks on the event loop while a thread
    of its own copies each chunk into an aligned buffer, checksums and writes
    it: one copy per byte, from the connection into the buffer, and not on
    the event loop, which has the TLS work to do.

    The thread holds the GIL as little as it can: the event loop's thread is
    the copy's bottleneck (it decrypts and parses every byte), so the copy
    into the buffer goes through ``ctypes.memmove``, which releases the GIL
    as the checksum and the write do (a slice assignment would hold it for
    the whole chunk).  It takes the next chunk as soon as it is handed over
    and frees its place with ``call_soon_threadsafe``: no hop through the
    event loop between two writes."""

    def __init__(self, direct: _Direct, checksum: Checksum, sparse: bool) -> None:
        self.direct, self.checksum, self.sparse = direct, checksum, sparse
        # Chunks handed over and not yet written, at most BUFFERS.
        self.places = asyncio.Semaphore(BUFFERS)
        # Chunks (their pieces) for the thread; None ends it.
        self.full: queue.SimpleQueue[list[_Piece] | None] = queue.SimpleQueue()
        self.stopped = False
        # An anonymous map is page-aligned, as direct I/O wants.
        self.buffer = mmap.mmap(-1, CHUNK)
        self._exported: ctypes.c_char | None = ctypes.c_char.from_buffer(self.buffer)
        self.address = ctypes.addressof(self._exported)

    def _write(self, pieces: list[_Piece]) -> None:
        size = 0
        for data, start, length in pieces:
            ctypes.memmove(self.address + size, _address(data) + start, length)
            size += length
        buffer = self.buffer
        view = memoryview(buffer)[:size]
        self.checksum.update(view)
        # A zero prefix is rare in data: only then the whole chunk is compared.
        if self.sparse and buffer[:64] == _ZEROS[:64] and buffer[:size] == _ZEROS[:size]:
            pass  # the fresh sparse file reads as zeros already
        elif size % ALIGN:
            self.direct.write_buffered(bytes(view))
        else:
            self.direct.write_view(view)
        view.release()
        self.direct.offset += size

    def write_all(self, loop: asyncio.AbstractEventLoop) -> None:
        """In the writer thread: write the chunks handed over until the end (or a stop)."""
        while not self.stopped and (pieces := self.full.get()) is not None:
            self._write(pieces)
            loop.call_soon_threadsafe(self.places.release)

    def stop(self) -> None:
        """Make the writer thread end after its current write."""
        self.stopped = True
        self.full.put(None)

    async def fill(self, read_some: ReadSome, length: int) -> None:
        """Gather the body into chunks, handing each to the writer."""
        pieces: list[_Piece] = []
        used = 0
        await self.places.acquire()
        async for piece in _pieces(read_some, length):
            start = 0
            while start < len(piece):
                take = min(len(piece) - start, CHUNK - used)
                pieces.append((piece, start, take))
                used, start = used + take, start + take
                if used == CHUNK:
                    self.full.put(pieces)
                    pieces, used = [], 0
                    await self.places.acquire()
        if used:
            self.full.put(pieces)
        self.full.put(None)

    def close(self) -> None:
        self._exported = None  # the buffer cannot close while exported
        self.buffer.close()


async def write_disk(
    template: NodeTemplate,
    disk: DiskDescription,
    read_some: ReadSome,
    length: int,
    checksum: Checksum,
) -> int:
    """Write the ``length`` bytes of a body read with ``read_some`` over the
    (existing) disk from its start, each added to ``checksum``; the bytes written."""
    path = template.attach(disk)
    capacity = await asyncio.to_thread(template.size, disk)
    if length > capacity:
        raise errors.OpExecError(f"The data sent ({length} bytes) is larger than disk {path}")
    fd = _open_direct(path, os.O_WRONLY)
    if fd is None:
        return await template.write_stream(disk, hashed(_chunks(read_some, length), checksum))
    direct = _Direct(fd, path)
    receiver = _Receiver(direct, checksum, template.SPARSE_WRITES)
    filling = asyncio.create_task(receiver.fill(read_some, length))
    loop = asyncio.get_running_loop()
    writing = in_own_thread(lambda: receiver.write_all(loop), f"write {path.name}")
    try:
        # Either may fail first (the sender stops, the disk refuses a write).
        done, _ = await asyncio.wait([filling, writing], return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()
        await asyncio.wait([filling, writing])  # wait() never cancels the thread's future
        filling.result()
        writing.result()
        await in_thread(os.fsync, fd)
        return direct.offset
    finally:
        receiver.stop()
        filling.cancel()
        # The thread may be using the buffers and the descriptor: it ends first
        # (after its current write); wait() does not cancel it.
        await asyncio.wait([filling, writing])
        receiver.close()
        direct.close()
