"""A child's output read to its end within a bound: the start is kept, the
rest is read (so that the child never blocks on a full pipe) and counted."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

_CHUNK = 65536
# Seconds the readers of a killed session get to reach the end of its pipes.
KILL_GRACE = 5.0


class CappedOutput:
    """The first ``limit`` bytes of a stream and the count of the others; what
    was read stays here if the reading is cancelled (a child killed on a timeout)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.dropped = 0

    async def read_all(self, stream: asyncio.StreamReader) -> None:
        """Read ``stream`` to its end."""
        while chunk := await stream.read(_CHUNK):
            room = max(self.limit - len(self.kept), 0)
            self.kept += chunk[:room]
            self.dropped += max(len(chunk) - room, 0)


async def read_capped(stream: asyncio.StreamReader, limit: int) -> tuple[bytes, int]:
    """The first ``limit`` bytes of ``stream`` up to its end, and how many more it had."""
    output = CappedOutput(limit)
    await output.read_all(stream)
    return bytes(output.kept), output.dropped


async def capture(
    proc: asyncio.subprocess.Process,
    limit: int,
    timeout: float,
    kill: Callable[[asyncio.subprocess.Process], None],
) -> tuple[CappedOutput, CappedOutput, bool]:
    """Read a child's stdout and stderr (each up to ``limit`` bytes kept) until
    it ends or ``timeout`` seconds pass; on the timeout, or when cancelled,
    ``kill`` it (its session) and let the readers drain for a while.  Returns
    both outputs and whether it timed out."""
    assert proc.stdout is not None and proc.stderr is not None
    out, err = CappedOutput(limit), CappedOutput(limit)
    finished = asyncio.gather(out.read_all(proc.stdout), err.read_all(proc.stderr), proc.wait())
    timed_out = False
    try:
        await asyncio.wait_for(asyncio.shield(finished), timeout)
    except TimeoutError:
        timed_out = True
        kill(proc)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(finished, KILL_GRACE)
    except asyncio.CancelledError:  # noded is stopping: the child goes too
        kill(proc)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(finished, KILL_GRACE)
        raise
    return out, err, timed_out
