"""The node's export directory: one directory per finished export
(``<export dir>/<instance>/``: ``config.ini`` and the disks' dumps), built
in ``<instance>.new/`` by the imports of an export and made current by
``finalize_export``."""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import re
import secrets
import shutil
import threading
from pathlib import Path

from corral import errors
from corral.paths import Paths

log = logging.getLogger(__name__)

CONFIG = "config.ini"
NEW = ".new"
# A replaced export waits here for its removal (a dot name: never listed).
RETIRED = ".retired-"
_LIBC = ctypes.CDLL(None, use_errno=True)
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
# A directory or file name directly below the export directory: no "/", no "..".
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


def check_name(name: object, what: str = "export name") -> str:
    """``name`` if it is a plain name (no path); OpExecError otherwise."""
    if not isinstance(name, str) or not _NAME_RE.match(name) or ".." in name or len(name) > 255:
        raise errors.OpExecError(f"Invalid {what} {name!r}")
    return name


def export_path(paths: Paths, name: object) -> Path:
    """``<export dir>/<name>``."""
    return paths.export_dir / check_name(name)


def new_dir(paths: Paths, instance: object) -> Path:
    """``<export dir>/<instance>.new`` (created), where an export is built."""
    path = paths.export_dir / (check_name(instance, "instance name") + NEW)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def dump_file(paths: Paths, export: object, file: object) -> Path:
    """A file of a finished export (which must exist)."""
    path = export_path(paths, export) / check_name(file, "file name")
    if not path.is_file():
        raise errors.OpExecError(f"No file {path.name} in the export {path.parent.name}")
    return path


def info(paths: Paths, name: object) -> str:
    """The text of the export's ``config.ini``."""
    path = export_path(paths, name) / CONFIG
    try:
        return path.read_text()
    except OSError as err:
        raise errors.OpExecError(f"Cannot read the export {name}: {err.strerror}") from None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def finalize(paths: Paths, instance: object, config_text: object) -> None:
    """Write ``config.ini`` into ``<instance>.new/`` and make it the export."""
    if not isinstance(config_text, str):
        raise errors.OpExecError("The export configuration must be text")
    building = new_dir(paths, instance)
    target = paths.export_dir / check_name(instance, "instance name")
    config = building / CONFIG
    fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, config_text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    _fsync_dir(building)
    if not target.exists():
        building.rename(target)
        _fsync_dir(paths.export_dir)
        return
    _exchange(building, target)
    # ``building`` now holds the previous export: out of the way of the next
    # export at once, removed in the background (a 1 GiB dump takes a fifth of
    # a second to delete; the job need not wait for that).
    retired = paths.export_dir / f"{RETIRED}{target.name}-{secrets.token_hex(4)}"
    building.rename(retired)
    _fsync_dir(paths.export_dir)
    threading.Thread(
        target=shutil.rmtree, args=(retired, True), name="export-retire", daemon=True
    ).start()


def _exchange(new: Path, current: Path) -> None:
    """Swap two directories at once (renameat2 RENAME_EXCHANGE): a crash
    leaves either the old export or the new one in place, never none."""
    if _LIBC.renameat2(_AT_FDCWD, bytes(new), _AT_FDCWD, bytes(current), _RENAME_EXCHANGE) == 0:
        return
    code = ctypes.get_errno()
    if code not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        raise OSError(code, os.strerror(code), str(current))
    # A file system without the exchange: the old export is set aside first.
    aside = current.with_name(f"{RETIRED}{current.name}-{secrets.token_hex(4)}")
    current.rename(aside)
    new.rename(current)
    aside.rename(new)


def remove(paths: Paths, name: object) -> None:
    """Remove the export ``name`` and a leftover ``<name>.new``."""
    path = export_path(paths, name)
    found = False
    for victim in (path, path.with_name(path.name + NEW)):
        if victim.is_dir():
            shutil.rmtree(victim)
            found = True
    if not found:
        raise errors.OpExecError(f"No export {name} on this node")


def discard_unfinished(paths: Paths, instance: object) -> bool:
    """Remove ``<instance>.new`` (an export that will not be finished);
    whether there was one."""
    path = paths.export_dir / (check_name(instance, "instance name") + NEW)
    if not path.is_dir():
        return False
    shutil.rmtree(path)
    return True


def unfinished(paths: Paths) -> list[str]:
    """The exports being built (``<instance>.new``), by instance name."""
    directory = paths.export_dir
    if not directory.is_dir():
        return []
    return sorted(
        p.name.removesuffix(NEW)
        for p in directory.iterdir()
        if p.is_dir() and not p.name.startswith(".") and p.name.endswith(NEW)
    )


def listing(paths: Paths) -> list[str]:
    """The finished exports (exports being built end in ``.new``)."""
    directory = paths.export_dir
    if not directory.is_dir():
        return []
    return sorted(
        p.name
        for p in directory.iterdir()
        if p.is_dir() and not p.name.startswith(".") and not p.name.endswith(NEW)
    )


def purge_unfinished(paths: Paths) -> list[str]:
    """Remove every ``<export dir>/*.new`` and replaced export not yet removed
    (run at noded's start: the imports that were writing them, or the removal,
    died with the previous noded)."""
    directory = paths.export_dir
    if not directory.is_dir():
        return []
    removed = []
    for path in sorted([*directory.glob("*" + NEW), *directory.glob(RETIRED + "*")]):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path.name)
    if removed:
        log.info("Removed unfinished exports: %s", ", ".join(removed))
    return removed
