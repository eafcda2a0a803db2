"""What a failed SQLite write means, told the way an operator can act on it.

SQLite reports a full disk, an I/O error or a read-only file system with its
own result codes; they become the errno text ("No space left on device") and
the file's path.  SQLite may already have rolled the transaction back by
itself (it does on SQLITE_FULL), so a rollback is attempted only when one is
still open: that is what used to answer "cannot rollback - no transaction is
active" instead of naming the cause.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from pathlib import Path

# Primary SQLite result codes (the low byte of an extended code) and the errno
# that says the same to an operator.
_CAUSES = {
    8: errno.EROFS,  # SQLITE_READONLY
    10: errno.EIO,  # SQLITE_IOERR
    13: errno.ENOSPC,  # SQLITE_FULL
    14: errno.EACCES,  # SQLITE_CANTOPEN
}
# What to do about each cause.
_ADVICE = {
    errno.ENOSPC: "free space and retry",
    errno.EROFS: "make the file system writable and retry",
    errno.EIO: "check the disk and retry",
    errno.EACCES: "check the file's permissions and retry",
}


def cause(err: sqlite3.Error, path: Path | str) -> int | None:
    """The errno a storage failure amounts to, or None for other errors.

    SQLite says only "I/O error" or "unable to open" when the file system
    became read-only (the kernel does that on disk errors): asked directly.
    """
    code = getattr(err, "sqlite_errorcode", None)
    number = None if code is None else _CAUSES.get(code & 0xFF)
    if number in (errno.EIO, errno.EACCES) and _read_only(path):
        return errno.EROFS
    return number


def _read_only(path: Path | str) -> bool:
    try:
        return bool(os.statvfs(os.path.dirname(path) or ".").f_flag & os.ST_RDONLY)
    except OSError:
        return False


def describe(err: BaseException, what: str, path: Path | str) -> str | None:
    """``"Cannot write <what> <path>: <cause>; <advice>"``, or None if not a storage fault."""
    number: int | None
    if isinstance(err, sqlite3.Error):
        number = cause(err, path)
    elif isinstance(err, OSError):
        number = err.errno
    else:
        return None
    if number not in _ADVICE:
        return None
    return f"Cannot write {what} {path}: {os.strerror(number)}; {_ADVICE[number]}"


def rollback(db: sqlite3.Connection) -> None:
    """Roll back the open transaction, if SQLite has not already done so."""
    if db.in_transaction:
        # A rollback that fails leaves SQLite to recover the journal on the
        # next use; the original error is the one to report.
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
