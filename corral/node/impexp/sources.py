"""What an export reads: a disk or file (direct I/O), a script's pipe, zeros.

A source returns the next piece of its data (at most FRAME bytes; empty at
the end) as a view: of the engine's buffer it was given (page-aligned, FRAME
bytes), or of the data where it already is in memory.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import mmap
import os
from pathlib import Path
from typing import Protocol

from corral import errors
from corral.node.impexp.scripts import ScriptPipe, ScriptRun
from corral.node.impexp.wire import FRAME

ALIGN = 4096
FRAME_PAGES = FRAME // ALIGN


class Source(Protocol):
    size: int | None

    def read(self, buffer: mmap.mmap) -> memoryview: ...

    def finish(self) -> None: ...

    def close(self) -> None: ...


_LIBC = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_LIBC.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)


class FileSource:
    """A disk or a file, ``size`` bytes of it.

    What the page cache holds (a disk in use) is sent straight from there,
    through a mapping of the file: no copy (copying it into a buffer cost as
    much CPU as a third of the TLS work).  The rest is read with direct I/O
    into the engine's buffer: the disk is read once, not kept in the cache.
    ``mincore`` tells one from the other, chunk by chunk.  (A file shrinking
    while mapped would fault on access: the master holds the instance's lock,
    and nothing truncates a disk being exported.)
    """

    def __init__(self, path: Path, size: int) -> None:
        self.path, self.size = path, size
        self.offset = 0
        self.fd = self._open(os.O_RDONLY)
        try:
            self.direct: int | None = self._open(os.O_RDONLY | os.O_DIRECT)
        except errors.OpExecError:
            self.direct = None  # no direct I/O on this file system: all mapped
        self.map: mmap.mmap | None = None
        self._anchor: ctypes.c_char | None = None
        if size > 0:
            # Private and writable only so that ctypes may take its address; never written.
            self.map = mmap.mmap(self.fd, size, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_WRITE)
            self._anchor = ctypes.c_char.from_buffer(self.map)
        self._pages = ctypes.create_string_buffer(FRAME_PAGES)

    def _open(self, flags: int) -> int:
        try:
            return os.open(self.path, flags | os.O_CLOEXEC)
        except OSError as err:
            if flags & os.O_DIRECT and err.errno == errno.EINVAL:
                raise errors.OpExecError("no direct I/O") from None
            raise errors.OpExecError(f"Cannot open {self.path}: {err.strerror}") from None

    def _cached(self, size: int) -> bool:
        if self.direct is None:
            return True
        assert self._anchor is not None
        pages = -(-size // ALIGN)
        address = ctypes.addressof(self._anchor) + self.offset
        if _LIBC.mincore(address, size, self._pages) != 0:
            return False
        return b"\x00" not in self._pages.raw[:pages]

    def read(self, buffer: mmap.mmap) -> memoryview:
        size = min(len(buffer), self.size - self.offset)
        if size <= 0:
            return memoryview(b"")
        assert self.map is not None
        if self._cached(size):
            view = memoryview(self.map)[self.offset : self.offset + size]
        else:
            view = self._read_direct(buffer, size)
        self.offset += size
        return view

    def _read_direct(self, buffer: mmap.mmap, size: int) -> memoryview:
        assert self.direct is not None
        with memoryview(buffer)[: -(-size // ALIGN) * ALIGN] as aligned:
            try:
                got = os.preadv(self.direct, [aligned], self.offset)
            except OSError as err:
                raise errors.OpExecError(f"Cannot read {self.path}: {err.strerror}") from None
        if got < size:
            raise errors.OpExecError(f"{self.path} shrank while being read")
        return memoryview(buffer)[:size]

    def finish(self) -> None:
        pass

    def close(self) -> None:
        self._anchor = None
        if self.map is not None:
            # A view may still be out (a failed send): the collector unmaps it then.
            with contextlib.suppress(BufferError):
                self.map.close()
            self.map = None
        for fd in (self.fd, self.direct):
            if fd is not None and fd >= 0:
                os.close(fd)
        self.fd, self.direct = -1, None


class ScriptSource(ScriptPipe):
    """The stdout of the OS export script (started by the engine)."""

    def __init__(self, script: ScriptRun, size: int | None) -> None:
        super().__init__(script)
        self.size = size

    def read(self, buffer: mmap.mmap) -> memoryview:
        view = memoryview(buffer)
        got, total = 0, len(view)
        try:
            while got < total:
                n = os.readv(self.fd, [view[got:]])
                if n == 0:
                    break
                got += n
        except OSError as err:
            raise errors.OpExecError(f"Cannot read the export script's output: {err}") from None
        finally:
            view.release()
        return memoryview(buffer)[:got]

    def finish(self) -> None:
        self.script.finish()


class ZeroSource:
    """``size`` zero bytes (benchmarks, tests): the buffers are fresh anonymous
    maps, all zeros, and never written by this source."""

    def __init__(self, size: int) -> None:
        self.size: int | None = size
        self.left = size

    def read(self, buffer: mmap.mmap) -> memoryview:
        step = min(len(buffer), self.left)
        self.left -= step
        return memoryview(buffer)[:step]

    def finish(self) -> None:
        pass

    def close(self) -> None:
        pass
