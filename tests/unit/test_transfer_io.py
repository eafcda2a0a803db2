"""The disk I/O of a copy between nodes (corral.node.transfer_io) on real files:
the reader and writer threads carry every byte, stop when the stream stops,
and leave no descriptor open, whatever way the stream ends."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from corral import errors
from corral.node.storage.base import CHUNK
from corral.node.storage.file import FileTemplate
from corral.node.transfer_io import read_disk, write_disk
from corral.node.transfer_stream import new_digest
from corral.paths import Paths
from corral.storage.disk import DiskDescription

MIB = 1024 * 1024


@pytest.fixture
def node(tmp_path: Path) -> FileTemplate:
    paths = Paths(tmp_path / "root")
    paths.file_storage_dir.mkdir(parents=True)
    probe = paths.file_storage_dir / "probe"
    probe.write_bytes(b"")
    try:
        os.close(os.open(probe, os.O_RDONLY | os.O_DIRECT))
    except OSError:
        pytest.skip("the file system of tmp_path has no direct I/O (the threads are not used)")
    return FileTemplate(paths)


def make_disk(
    node: FileTemplate, name: str, size_mib: int, content: bytes = b""
) -> DiskDescription:
    disk = DiskDescription(
        "file", ("loop", f"/srv/ganeti/file-storage/inst1/{name}"), size_mib, name
    )
    node.create(disk)
    if content:
        node.attach(disk).write_bytes(content)
    return disk


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def body(data: bytes, piece: int) -> Callable[[], Awaitable[bytes]]:
    """A request body read in uneven pieces, as a connection delivers it."""
    offset = 0

    async def read_some() -> bytes:
        nonlocal offset
        chunk = data[offset : offset + piece]
        offset += len(chunk)
        return chunk

    return read_some


async def test_every_byte_crosses_both_threads(node: FileTemplate) -> None:
    content = os.urandom(13 * MIB)
    source = make_disk(node, "src", 13, content)
    target = make_disk(node, "dst", 13)
    before = open_fds()
    sent, read = new_digest(), bytearray()
    async for chunk in read_disk(node, source, sent):
        read += chunk
    assert bytes(read) == content
    # A length that ends inside a block: the tail is written through the cache.
    length = 3 * CHUNK + 5000
    received = new_digest()
    written = await write_disk(node, target, body(content[:length], 300_001), length, received)
    assert written == length
    assert node.attach(target).read_bytes()[:length] == content[:length]
    check = new_digest()
    check.update(content[:length])
    assert received.hexdigest() == check.hexdigest()
    check = new_digest()
    check.update(content)
    assert sent.hexdigest() == check.hexdigest()
    assert open_fds() == before


async def test_a_reader_stopped_early_closes_the_disk(node: FileTemplate) -> None:
    source = make_disk(node, "src", 40, os.urandom(40 * MIB))
    before = open_fds()
    chunks = read_disk(node, source, new_digest())
    first = await chunks.__anext__()
    assert len(first) == CHUNK
    await chunks.aclose()  # returns only once the reader thread has ended
    assert open_fds() == before


async def test_a_disk_shrinking_while_read_fails_the_stream(node: FileTemplate) -> None:
    source = make_disk(node, "src", 64, os.urandom(64 * MIB))
    before = open_fds()
    chunks = read_disk(node, source, new_digest())
    await chunks.__anext__()
    # The thread reads at most a few chunks ahead: the later ones are gone.
    os.truncate(node.attach(source), 8 * MIB)
    with pytest.raises(errors.OpExecError, match="shrank while being read"):
        async for _ in chunks:
            pass
    assert open_fds() == before


async def test_a_body_ending_short_fails_and_closes_the_disk(node: FileTemplate) -> None:
    target = make_disk(node, "dst", 16)
    before = open_fds()
    data = os.urandom(6 * MIB)
    with pytest.raises(errors.OpExecError, match=f"stopped after {6 * MIB} of {16 * MIB}"):
        await write_disk(node, target, body(data, 256 * 1024), 16 * MIB, new_digest())
    assert open_fds() == before


async def test_a_cancelled_receive_stops_its_thread_and_closes_the_disk(node: FileTemplate) -> None:
    target = make_disk(node, "dst", 16)
    before = open_fds()
    stalled = asyncio.Event()
    pieces = [os.urandom(CHUNK), os.urandom(CHUNK)]

    async def read_some() -> bytes:
        if pieces:
            return pieces.pop()
        stalled.set()  # the sender goes quiet: the receive is cancelled
        await asyncio.Event().wait()
        return b""

    task = asyncio.create_task(write_disk(node, target, read_some, 16 * MIB, new_digest()))
    await stalled.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert open_fds() == before
