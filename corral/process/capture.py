"""A child's output read to its end within a bound: the start is kept, the
rest is read (so that the child never blocks on a full pipe) and counted."""

from __future__ import annotations

import asyncio

_CHUNK = 65536


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
