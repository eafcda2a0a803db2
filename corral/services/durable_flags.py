"""Two flags of masterd's durable state: the queue's drain flag and the
watcher's pause.

The pause is a time (seconds since the epoch) until which the cluster
watcher (``ganeti-watcher``, corral.tools.watcher) must not act; one in the
past means no pause.  Ganeti's tools see and set it as on Ganeti.
"""

from __future__ import annotations

import math
import time

from corral import constants as C
from corral import errors
from corral.services.durable import DRAINED, WATCHER_PAUSE, DurableState


def drained(state: DurableState) -> bool:
    """Whether the job queue refuses new jobs (once the flag is durable)."""
    return bool(state.committed(DRAINED, False))


async def set_drained(state: DurableState, flag: bool) -> None:
    if flag:
        await state.put(DRAINED, True)
    else:
        await state.delete(DRAINED)


def watcher_paused_until(state: DurableState) -> int | None:
    """The end of the pause, or None when the watcher is not paused."""
    until = state.committed(WATCHER_PAUSE)
    return until if isinstance(until, int) and until > time.time() else None


async def set_watcher_pause(state: DurableState, until: object) -> float | None:
    """Pause until ``until`` (seconds since the epoch), or end the pause (None)."""
    if until is None:
        await state.delete(WATCHER_PAUSE)
        return None
    if isinstance(until, bool) or not isinstance(until, int | float) or not math.isfinite(until):
        raise errors.OpPrereqError(
            f"SetWatcherPause takes a time in seconds since the epoch or null, got {until!r}",
            C.ECODE_INVAL,
        )
    await state.put(WATCHER_PAUSE, int(until))
    return float(until)
