"""The file-based templates on a node: ``file`` (sparse files in the node's
file storage directory) and ``sharedfile`` (the same in the directory every
node sees: created once, by the primary node, and seen by all).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from corral import errors
from corral.node.storage.base import NodeTemplate
from corral.node.storage.dirs import storage_path, template_dirs
from corral.storage import names as N
from corral.storage.disk import DiskDescription

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
    """Extend a disk file (never shrink it)."""
    try:
        current = path.stat().st_size
    except FileNotFoundError:
        raise errors.OpExecError(f"Disk file {path} does not exist") from None
    if new_size_mib * MIB < current:
        raise errors.OpExecError(f"Disk file {path} cannot shrink")
    with path.open("r+b") as handle:
        handle.truncate(new_size_mib * MIB)


def rename(old: Path, new: Path) -> None:
    """Move a disk file (for an instance rename); its old directory goes once empty.

    A file already moved (a retried rename) is fine.
    """
    if not old.exists() and new.exists():
        return
    if new.exists():
        raise errors.OpExecError(f"Cannot rename {old} to {new}: the target exists")
    new.parent.mkdir(parents=True, exist_ok=True)
    try:
        shutil.move(str(old), str(new))
    except OSError as err:
        raise errors.OpExecError(f"Cannot rename {old} to {new}: {err.strerror}") from None
    with contextlib.suppress(OSError):
        old.parent.rmdir()


def free_mib(directory: Path) -> tuple[int, int]:
    """``(total, free)`` MiB of the filesystem holding ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    st = os.statvfs(directory)
    return st.f_blocks * st.f_frsize // MIB, st.f_bavail * st.f_frsize // MIB


class FileTemplate(NodeTemplate):
    """``file``: logical_id ``[driver, path]``, the path in the template's directory."""

    NAME = N.DT_FILE
    SPARSE_WRITES = True

    def _path(self, logical_id: tuple[str, ...]) -> Path:
        if len(logical_id) != 2 or logical_id[0] not in N.FILE_DRIVERS:
            raise errors.OpExecError(
                f"Invalid logical_id {list(logical_id)!r} for a {self.NAME} disk:"
                f" expected [driver, path] with a driver among {', '.join(N.FILE_DRIVERS)}"
            )
        return storage_path(self.paths, logical_id[1], dirs=template_dirs(self.paths, self.NAME))

    def attach(self, disk: DiskDescription) -> Path:
        return self._path(disk.logical_id)

    def create(self, disk: DiskDescription) -> None:
        if disk.size <= 0:
            raise errors.OpExecError(f"Invalid disk size {disk.size!r}")
        create(self.attach(disk), disk.size)

    def remove(self, disk: DiskDescription) -> None:
        remove(self.attach(disk))

    def grow(self, disk: DiskDescription, new_size: int) -> None:
        grow(self.attach(disk), new_size)

    def rename(self, disk: DiskDescription, new_logical_id: tuple[str, ...]) -> None:
        rename(self.attach(disk), self._path(new_logical_id))


class SharedFileTemplate(FileTemplate):
    """``sharedfile``: as ``file``, in the shared file storage directory."""

    NAME = N.DT_SHARED_FILE
