"""The contract every disk template fulfils on a node.

A template's node-side class resolves a disk description to the local path
the hypervisor and OS scripts use (``attach``), refusing any description
whose path lies outside what the template may touch; it creates, removes,
grows and renames disks, says whether a disk is as the configuration says
(``verify``) and streams a disk's content out or in (``read_stream`` /
``write_stream``: what a copy between two nodeds sends over its TLS stream,
chunk by chunk, without a temporary copy).

As Ganeti's block devices, a disk is assembled before it is used (made
ready on this node: for a mirrored disk, its link to the other copy) and
shut down after, and reports its sync status; for disks that are plain
files or devices these are trivial.  A template also answers for its storage
type: whether the node can serve a storage unit of it, and its capacity.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from abc import ABC, abstractmethod
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from corral import errors
from corral.disk_description import DiskDescription
from corral.paths import Paths

MIB = 1024 * 1024
# Bytes read or written per step of a copy stream.
CHUNK = 4 * MIB


@dataclass(frozen=True)
class SyncStatus:
    """A disk's state on this node (the part of Ganeti's BlockDevStatus Corral has)."""

    present: bool
    # Why the disk is not usable as configured (too small, unreadable), or None.
    problem: str | None = None
    # A mirrored disk lacks an up-to-date copy (Ganeti's is_degraded).
    degraded: bool = False
    # While a resync runs: how far it is (percent) and the seconds left.
    sync_percent: float | None = None
    estimated_time: int | None = None


@dataclass(frozen=True)
class Capacity:
    """Size and free space of a storage unit, in MiB."""

    total: int
    free: int


class NodeTemplate(ABC):
    """A disk template as one node serves it (one instance per call)."""

    NAME: ClassVar[str]
    # Ganeti's storage type of the template's disks (names.ST_*).
    STORAGE_TYPE: ClassVar[str]
    # Writing a run of zeros may skip it (the disk is a fresh sparse file).
    SPARSE_WRITES = False
    # Writes must go through a mirror to both copies, never to the local path alone.
    MIRRORED = False

    def __init__(self, paths: Paths) -> None:
        self.paths = paths

    @abstractmethod
    def attach(self, disk: DiskDescription) -> Path:
        """The local path of ``disk``; OpExecError if the description names a
        path the template may not use."""

    @abstractmethod
    def create(self, disk: DiskDescription) -> None:
        """Make the disk (of ``disk.size`` MiB)."""

    @abstractmethod
    def remove(self, disk: DiskDescription) -> None:
        """Remove the disk; a disk already gone is fine."""

    @abstractmethod
    def grow(self, disk: DiskDescription, new_size: int) -> None:
        """Grow the disk to ``new_size`` MiB."""

    @abstractmethod
    def rename(self, disk: DiskDescription, new_logical_id: tuple[str, ...]) -> None:
        """Move the disk to ``new_logical_id`` (an instance rename)."""

    def size(self, disk: DiskDescription) -> int:
        """The disk's actual size in bytes."""
        path = self.attach(disk)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as err:
            raise errors.OpExecError(f"Cannot open disk {path}: {err.strerror}") from None
        try:
            return os.lseek(fd, 0, os.SEEK_END)
        finally:
            os.close(fd)

    def verify(self, disk: DiskDescription) -> str | None:
        """Why the disk is not as described (missing, too small), or None."""
        try:
            actual = self.size(disk)
        except errors.GenericError as err:
            return err.message
        if actual < disk.size * MIB:
            return f"disk {disk.iv_name or disk.uuid} has {actual // MIB} MiB, not {disk.size} MiB"
        return None

    async def assemble(self, disk: DiskDescription) -> Path:
        """Make the disk ready for use on this node; its local path.  A disk
        that is a plain file or device needs nothing: its path."""
        return await asyncio.to_thread(self.attach, disk)

    async def shutdown(self, disk: DiskDescription) -> None:
        """Undo :meth:`assemble` (the data stays); nothing for a plain disk."""
        await asyncio.to_thread(self.attach, disk)

    @contextlib.asynccontextmanager
    async def opened(self, disk: DiskDescription) -> AsyncIterator[Path]:
        """The disk for this node's own writes (OS scripts, images) while the
        block runs: a plain disk's path; a mirrored disk's writes must reach
        both copies."""
        yield await self.assemble(disk)

    def sync_status(self, disk: DiskDescription) -> SyncStatus:
        """The disk's state here: missing, faulty, or there (a plain disk is
        never degraded and never resyncs)."""
        if not self.attach(disk).exists():
            return SyncStatus(present=False)
        return SyncStatus(present=True, problem=self.verify(disk))

    def unit_problem(self, key: str | None) -> str | None:
        """Why this node cannot serve the storage unit ``key`` of the
        template's storage type, or None if it can."""
        return None

    def capacity(self, key: str) -> Capacity:
        """Size and free space of the storage unit ``key``."""
        raise errors.OpExecError(f"Storage type {self.STORAGE_TYPE} reports no capacity")

    async def read_stream(self, disk: DiskDescription) -> AsyncIterator[bytes]:
        """The disk's content, chunk by chunk."""
        path, size = self.attach(disk), self.size(disk)
        fd = os.open(path, os.O_RDONLY)
        try:
            offset = 0
            while offset < size:
                data = await asyncio.to_thread(os.pread, fd, min(CHUNK, size - offset), offset)
                if not data:
                    raise errors.OpExecError(f"Disk {path} shrank while being read")
                offset += len(data)
                yield data
        finally:
            os.close(fd)

    async def write_stream(self, disk: DiskDescription, chunks: AsyncIterable[bytes]) -> int:
        """Write ``chunks`` over the (existing) disk from its start; the bytes written."""
        path = self.attach(disk)
        capacity = self.size(disk)
        fd = os.open(path, os.O_WRONLY)
        try:
            offset = 0
            async for chunk in chunks:
                if offset + len(chunk) > capacity:
                    raise errors.OpExecError(f"The data sent is larger than disk {path}")
                if not (self.SPARSE_WRITES and chunk.count(0) == len(chunk)):
                    await asyncio.to_thread(_pwrite_all, fd, chunk, offset)
                offset += len(chunk)
            await asyncio.to_thread(os.fsync, fd)
            return offset
        finally:
            os.close(fd)


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def refuse(template: str, doing: str) -> errors.OpExecError:
    """The error of an operation ``template`` does not have."""
    return errors.OpExecError(f"Disks of the {template} template cannot {doing}")
