"""Copying a disk's data to another disk of the same size on this node (for
disk template conversions), leaving the destination's holes where the source
has them."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from corral import errors

_CHUNK = 8 * 1024 * 1024


def _extents(fd: int, size: int) -> list[tuple[int, int]]:
    """The source's data extents ``(offset, length)``; the whole range when
    the file system cannot tell (a block device)."""
    out: list[tuple[int, int]] = []
    offset = 0
    try:
        while offset < size:
            start = os.lseek(fd, offset, os.SEEK_DATA)
            end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
            out.append((start, end - start))
            offset = end
    except OSError as err:
        if err.errno == errno.ENXIO:  # no data after offset
            return out
        if err.errno in (errno.EINVAL, errno.EOPNOTSUPP):
            return [(0, size)]
        raise
    return out


def copy_disk(src: Path, dst: Path) -> None:
    """Copy ``src`` over ``dst`` (which must be at least as large)."""
    try:
        with open(src, "rb", buffering=0) as source, open(dst, "r+b", buffering=0) as target:
            size = os.lseek(source.fileno(), 0, os.SEEK_END)
            room = os.lseek(target.fileno(), 0, os.SEEK_END)
            if room < size:
                raise errors.OpExecError(
                    f"Disk {dst} ({room} bytes) is smaller than {src} ({size} bytes)"
                )
            for offset, length in _extents(source.fileno(), size):
                done = 0
                while done < length:
                    data = os.pread(source.fileno(), min(_CHUNK, length - done), offset + done)
                    if not data:
                        break
                    os.pwrite(target.fileno(), data, offset + done)
                    done += len(data)
            os.fsync(target.fileno())
    except OSError as err:
        raise errors.OpExecError(f"Cannot copy {src} to {dst}: {err.strerror}") from None
