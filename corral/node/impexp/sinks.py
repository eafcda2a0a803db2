"""What an import writes to: a disk or file (direct I/O), a script's pipe, nothing.

``write`` takes the data in pieces of any size; ``finish`` makes it safe
(fsync; the import script's successful end) and only then may the importer
confirm the stream.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import mmap
import os
from pathlib import Path
from typing import Protocol

from corral import errors
from corral.node.impexp.scripts import ScriptPipe
from corral.node.impexp.wire import FRAME

ALIGN = 4096
_ZEROS = bytes(FRAME)
_LIBC = ctypes.CDLL(ctypes.util.find_library("c"))
_LIBC.memcmp.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t)


def _all_zeros(view: memoryview) -> bool:
    """Whether ``view`` (writable: a view of one of the engine's maps) holds
    only zeros.  Data rarely starts with 64 zero bytes, so that is looked at
    first; then one memcmp (comparing memoryviews goes item by item)."""
    if view[:64].tobytes() != _ZEROS[:64]:
        return False
    address = ctypes.addressof(ctypes.c_char.from_buffer(view))
    return bool(_LIBC.memcmp(address, _ZEROS, len(view)) == 0)


class Sink(Protocol):
    def write(self, data: memoryview | bytes) -> None: ...

    def finish(self) -> None: ...

    def close(self) -> None: ...


def _write_error(path: Path, err: OSError) -> errors.OpExecError:
    if err.errno == errno.ENOSPC:
        return errors.OpExecError(f"No space left on the device of {path}")
    return errors.OpExecError(f"Cannot write {path}: {err.strerror}")


class FileSink:
    """A disk or a file written from its start with direct I/O: whole
    FRAME-sized aligned pieces go straight to the device (no copy), others
    are gathered into an aligned buffer first.

    ``sparse``: the target reads as zeros already (a fresh sparse file), so
    runs of zeros are skipped.  ``capacity``: the most it may take (a disk).
    ``truncate``: the file ends where the data does (a file of an export).
    """

    def __init__(self, path: Path, flags: int, *, sparse: bool, capacity: int | None) -> None:
        self.path, self.sparse, self.capacity = path, sparse, capacity
        self.truncate = bool(flags & os.O_CREAT)
        self.direct = True
        try:
            self.fd = os.open(path, flags | os.O_DIRECT | os.O_CLOEXEC, 0o600)
        except OSError as err:
            if err.errno != errno.EINVAL:
                raise errors.OpExecError(f"Cannot open {path}: {err.strerror}") from None
            self.direct = False
            try:
                self.fd = os.open(path, flags | os.O_CLOEXEC, 0o600)
            except OSError as err2:
                raise errors.OpExecError(f"Cannot open {path}: {err2.strerror}") from None
        self.offset = 0
        self.pending = mmap.mmap(-1, FRAME)
        self.used = 0

    def _put(self, view: memoryview) -> None:
        size = len(view)
        if self.capacity is not None and self.offset + size > self.capacity:
            raise errors.OpExecError(f"The data is larger than {self.path} ({self.capacity} bytes)")
        if not (self.sparse and _all_zeros(view)):
            done = 0
            try:
                while done < size:
                    done += os.pwrite(self.fd, view[done:], self.offset + done)
            except OSError as err:
                raise _write_error(self.path, err) from None
        self.offset += size

    def write(self, data: memoryview | bytes) -> None:
        view = memoryview(data)
        if self.used == 0 and len(view) == FRAME:
            self._put(view)
            return
        start = 0
        while start < len(view):
            take = min(FRAME - self.used, len(view) - start)
            self.pending[self.used : self.used + take] = view[start : start + take]
            self.used += take
            start += take
            if self.used == FRAME:
                with memoryview(self.pending) as full:
                    self._put(full)
                self.used = 0

    def _tail(self) -> None:
        """The last piece, which may not be a whole number of blocks."""
        with memoryview(self.pending)[: self.used] as view:
            if not self.direct or self.used % ALIGN == 0:
                self._put(view)
                return
            fd = os.open(self.path, os.O_WRONLY | os.O_CLOEXEC)
            try:
                direct, self.fd, self.direct = self.fd, fd, False
                self._put(view)
            finally:
                self.fd = direct
                os.fsync(fd)
                os.close(fd)
        self.used = 0

    def finish(self) -> None:
        if self.used:
            self._tail()
        try:
            if self.truncate:
                os.ftruncate(self.fd, self.offset)
            os.fsync(self.fd)
        except OSError as err:
            raise _write_error(self.path, err) from None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class ScriptSink(ScriptPipe):
    """The stdin of the OS import script (started by the engine)."""

    def write(self, data: memoryview | bytes) -> None:
        view = memoryview(data)
        done = 0
        try:
            while done < len(view):
                done += os.write(self.fd, view[done:])
        except OSError as err:
            raise errors.OpExecError(f"Cannot write to the import script: {err.strerror}") from None

    def finish(self) -> None:
        os.close(self.fd)
        self.fd = -1
        self.script.finish()


class DiscardSink:
    """Drops the data (benchmarks, tests)."""

    def write(self, data: memoryview | bytes) -> None:
        pass

    def finish(self) -> None:
        pass

    def close(self) -> None:
        pass
