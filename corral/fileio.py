"""Small file helpers shared by daemons and tools (stdlib only)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write(
    path: Path | str,
    data: bytes,
    *,
    mode: int = 0o644,
    uid: int | None = None,
    gid: int | None = None,
    times: tuple[float, float] | None = None,
    durable: bool = True,
) -> None:
    """Replace ``path`` with ``data`` so that readers see the old or the new file.

    The new file gets ``mode``, owner ``uid``/``gid`` (unchanged when None) and
    ``times`` = ``(atime, mtime)``, all set before it takes the final name.
    ``durable``: synced to disk first (a copy made again after a crash may skip it).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            # The owner first: a change of owner clears the set-user-id and
            # set-group-id bits that a mode gives.
            if uid is not None or gid is not None:
                os.fchown(handle.fileno(), -1 if uid is None else uid, -1 if gid is None else gid)
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        if times is not None:
            os.utime(tmp, times)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
