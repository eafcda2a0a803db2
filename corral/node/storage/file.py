"""The file-based templates on a node: ``file`` (sparse files in the node's
file storage directory) and ``sharedfile`` (the same in the directory every
node sees: created once, by the primary node, and seen by all).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import threading
from pathlib import Path

from corral import errors
from corral import storage_names as N
from corral.disk_description import DiskDescription
from corral.node.storage.base import Capacity, NodeTemplate
from corral.node.storage.dirs import storage_dirs, storage_path, template_dirs
from corral.paths import Paths

MIB = 1024 * 1024
# Where Ganeti never keeps disk files: these directories and what is below them.
FORBIDDEN_DIRS = frozenset(
    {"/boot", "/dev", "/etc", "/home", "/proc", "/root", "/sys"}
    | {
        f"{prefix}/{d}"
        for prefix in ("", "/usr", "/usr/local")
        for d in ("bin", "lib", "lib32", "lib64", "sbin")
    }
)


def forbidden_dir(path: str) -> bool:
    """Whether ``path`` (absolute) is one of FORBIDDEN_DIRS or below one."""
    path = os.path.normpath(path)
    return any(path == d or path.startswith(d + "/") for d in FORBIDDEN_DIRS)


# A removed disk file is first renamed to a hidden name in the top storage
# directory (the same filesystem): it is gone at once, its instance
# directory with it; then it is unlinked in a background thread, as ext4
# takes about a fifth of a second to free 1 GiB, which no job need wait for.
# Leftovers of a noded that died meanwhile are unlinked when it starts again.
# Whatever needs the space back (a new disk, a grown one, the free space a
# node reports) first waits for the unlinks still running.
REMOVING = ".removing-"
# One event per unlink under way, set when it is over (an event, not the
# thread: a waiter may come between registering a thread and starting it).
_UNLINKING: set[threading.Event] = set()
_UNLINKING_LOCK = threading.Lock()
# Held while an instance directory is made and filled, and while a removal
# takes it away once empty: a directory is never removed under a new disk.
_DIR_LOCK = threading.Lock()


def create(path: Path, size_mib: int) -> None:
    """Create a sparse file of ``size_mib`` MiB; refuse to overwrite one."""
    settle()
    try:
        with _DIR_LOCK:
            path.parent.mkdir(parents=True, exist_ok=True)
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


def _remove_dir(directory: Path) -> None:
    """Remove an instance directory once empty (other disks may stay in it)."""
    with _DIR_LOCK, contextlib.suppress(OSError):
        directory.rmdir()


def remove(path: Path, top: Path | None = None) -> None:
    """Remove a disk file and its instance directory once empty; with the
    storage directory ``top`` holding it, the file's blocks are freed in the
    background."""
    if top is None:
        path.unlink(missing_ok=True)
    else:
        hidden = top / f"{REMOVING}{secrets.token_hex(8)}"
        try:
            os.rename(path, hidden)
        except FileNotFoundError:
            pass  # already gone: only the directory may be left
        except OSError:
            path.unlink(missing_ok=True)  # another filesystem: at once, then
        else:
            _unlink_later(hidden)
    _remove_dir(path.parent)


def _unlink_later(path: Path) -> None:
    done = threading.Event()

    def run() -> None:
        try:
            path.unlink(missing_ok=True)
        finally:
            with _UNLINKING_LOCK:
                _UNLINKING.discard(done)
            done.set()

    with _UNLINKING_LOCK:
        _UNLINKING.add(done)
    threading.Thread(target=run, name="disk-remove", daemon=True).start()


def settle() -> None:
    """Wait until the space of the removed disk files is free again."""
    with _UNLINKING_LOCK:
        pending = list(_UNLINKING)
    for done in pending:
        done.wait()


def remove_leftovers(paths: Paths) -> None:
    """At noded's start: unlink the disk files a dead noded was removing."""
    for top in storage_dirs(paths):
        for hidden in top.glob(f"{REMOVING}*"):
            hidden.unlink(missing_ok=True)


def grow(path: Path, new_size_mib: int) -> None:
    """Extend a disk file (never shrink it)."""
    settle()
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
    try:
        with _DIR_LOCK:
            new.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(old), str(new))
    except OSError as err:
        raise errors.OpExecError(f"Cannot rename {old} to {new}: {err.strerror}") from None
    _remove_dir(old.parent)


def free_mib(directory: Path) -> tuple[int, int]:
    """``(total, free)`` MiB of the filesystem holding ``directory``."""
    settle()
    directory.mkdir(parents=True, exist_ok=True)
    st = os.statvfs(directory)
    return st.f_blocks * st.f_frsize // MIB, st.f_bavail * st.f_frsize // MIB


class FileTemplate(NodeTemplate):
    """``file``: logical_id ``[driver, path]``, the path in the template's directory."""

    NAME = N.DT_FILE
    STORAGE_TYPE = N.ST_FILE
    SPARSE_WRITES = True
    # What the template's storage unit is, in messages.
    UNIT_WHAT = "file storage directory"

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
        path = self.attach(disk)
        tops = [top for top in template_dirs(self.paths, self.NAME) if path.is_relative_to(top)]
        remove(path, tops[0] if tops else None)

    def grow(self, disk: DiskDescription, new_size: int) -> None:
        grow(self.attach(disk), new_size)

    def rename(self, disk: DiskDescription, new_logical_id: tuple[str, ...]) -> None:
        rename(self.attach(disk), self._path(new_logical_id))

    def unit_dir(self, key: str) -> Path:
        """The local directory of the storage unit ``key``: one of the
        template's directories (OpExecError for any other path)."""
        return storage_path(
            self.paths, key, strictly=False, dirs=template_dirs(self.paths, self.NAME)
        )

    def unit_problem(self, key: str | None) -> str | None:
        """The directory must be one this node can write in."""
        if not key:
            return f"no {self.UNIT_WHAT} is set"
        try:
            local = self.paths.from_wire(key)
        except ValueError:
            return f"the {self.UNIT_WHAT} '{key}' is not an absolute path"
        if forbidden_dir(key):
            return f"Path '{key}' uses a forbidden prefix"  # Ganeti's words
        if not local.is_dir():
            state = "does not exist" if not local.exists() else "is not a directory"
            return f"the {self.UNIT_WHAT} {key} {state}"
        if not os.access(local, os.W_OK | os.X_OK):
            return f"the {self.UNIT_WHAT} {key} is not writable"
        return None

    def capacity(self, key: str) -> Capacity:
        """The file system holding the directory (once removed disks' space is back)."""
        return Capacity(*free_mib(self.unit_dir(key)))


class SharedFileTemplate(FileTemplate):
    """``sharedfile``: as ``file``, in the shared file storage directory."""

    NAME = N.DT_SHARED_FILE
    STORAGE_TYPE = N.ST_SHARED_FILE
    UNIT_WHAT = "shared file storage directory"
