"""Small tmpfs file systems for storage-fault tests (tests run as root).

Each mount gets a unique source name and is always unmounted afterwards.
"""

from __future__ import annotations

import errno
import os
import secrets
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def tmpfs(path: Path, size: str, nr_inodes: int | None = None) -> Iterator[Path]:
    """A tmpfs of ``size`` (e.g. "2m") mounted on ``path`` for the block; with
    ``nr_inodes``, that many files and directories at most (its root counts)."""
    path.mkdir(parents=True, exist_ok=True)
    name = f"corral-test-{secrets.token_hex(4)}"
    options = f"size={size}" + (f",nr_inodes={nr_inodes}" if nr_inodes else "")
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, name, str(path)], check=True)
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path) -> Path:
    """Fill the file system of ``directory`` to the last byte; the filler file."""
    filler = directory / f"filler-{secrets.token_hex(4)}"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        for chunk in (1 << 20, 1 << 12, 1):
            block = b"\0" * chunk
            while True:
                try:
                    os.write(fd, block)
                except OSError as err:
                    if err.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    return filler


def remount(path: Path, mode: str) -> None:
    """Remount the tmpfs on ``path`` read-only ("ro") or writable ("rw")."""
    subprocess.run(["mount", "-o", f"remount,{mode}", str(path)], check=True)
