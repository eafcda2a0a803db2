"""The watcher pause: a time until which the cluster watcher must not act.

Ganeti keeps it as a file holding the end of the pause in seconds since the
epoch (``watcher.pause`` in the data directory); a time in the past means no
pause.  Corral has no watcher daemon yet; the flag is kept so that Ganeti's
tools, and a watcher to come, see and set it as on Ganeti.
"""

from __future__ import annotations

import math
import time

from corral import constants as C
from corral import errors
from corral.fileio import atomic_write
from corral.paths import Paths


def paused_until(paths: Paths) -> int | None:
    """The end of the pause, or None when the watcher is not paused."""
    try:
        text = paths.watcher_pause_file.read_text()
    except FileNotFoundError:
        return None
    try:
        until = int(text.strip())
    except ValueError:
        return None
    return until if until > time.time() else None


def set_pause(paths: Paths, until: object) -> float | None:
    """Pause until ``until`` (seconds since the epoch), or end the pause (None)."""
    if until is None:
        paths.watcher_pause_file.unlink(missing_ok=True)
        return None
    if isinstance(until, bool) or not isinstance(until, int | float) or not math.isfinite(until):
        raise errors.OpPrereqError(
            f"SetWatcherPause takes a time in seconds since the epoch or null, got {until!r}",
            C.ECODE_INVAL,
        )
    atomic_write(paths.watcher_pause_file, f"{int(until)}\n".encode(), mode=0o644)
    return float(until)
