"""The ``file`` disk template: sparse files under the file storage directory."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from corral import errors

MIB = 1024 * 1024


def create(path: Path, size_mib: int) -> None:
    """Create a sparse file of ``size_mib`` MiB; refuse to overwrite one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise errors.OpExecError(f"Disk file {path} already exists") from None
    try:
        os.ftruncate(fd, size_mib * MIB)
    except OSError as err:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise errors.OpExecError(f"Cannot create disk file {path}: {err.strerror}") from None
    os.close(fd)


def remove(path: Path) -> None:
    """Remove a disk file and its instance directory once empty."""
    path.unlink(missing_ok=True)
    # The directory stays while other disks of the instance are in it.
    with contextlib.suppress(OSError):
        path.parent.rmdir()


def grow(path: Path, new_size_mib: int) -> None:
    try:
        current = path.stat().st_size
    except FileNotFoundError:
        raise errors.OpExecError(f"Disk file {path} does not exist") from None
    if new_size_mib * MIB < current:
        raise errors.OpExecError(f"Disk file {path} cannot shrink")
    with path.open("r+b") as handle:
        handle.truncate(new_size_mib * MIB)


def rename_dir(old: Path, new: Path) -> None:
    """Move an instance's disk directory (for an instance rename)."""
    if not old.exists():
        return
    if new.exists():
        raise errors.OpExecError(f"Cannot rename {old} to {new}: the target exists")
    new.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(old), str(new))


def free_mib(directory: Path) -> tuple[int, int]:
    """``(total, free)`` MiB of the filesystem holding ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    st = os.statvfs(directory)
    return st.f_blocks * st.f_frsize // MIB, st.f_bavail * st.f_frsize // MIB
