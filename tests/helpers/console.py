"""A test's own client of noded's console relay: what the console printed,
waited for by content (never by time)."""

from __future__ import annotations

import select
import time

from corral.cli import console_client as CC
from tests.helpers.noded import Noded

# The data frames' opcodes (continuation, text, binary) and the close frame's.
_DATA = (0, 1, 2)
CLOSE = 8


class Console:
    """The relay's WebSocket to ``name``'s console on ``node``."""

    def __init__(self, node: Noded, name: str) -> None:
        self.sock, pending = CC.connect(str(node.paths.root), node.address, node.port, name)
        self.frames = CC.Frames(pending)
        self.seen = b""
        self.closed: bytes | None = None  # the close frame's payload, once it came

    def type(self, text: str) -> None:
        self.sock.sendall(CC.frame(2, text.encode()))

    def _read(self, timeout: float) -> None:
        """Take in what arrives within ``timeout`` seconds (some of it at least)."""
        if self.sock.pending() or select.select([self.sock], [], [], timeout)[0]:
            data = self.sock.recv(65536)
            assert data, f"the relay closed without a close frame; got {self.seen[-2000:]!r}"
            self.frames.feed(data)
        while (item := self.frames.next()) is not None:
            if item[0] in _DATA:
                self.seen += item[1]
            elif item[0] == CLOSE:
                self.closed = item[1]

    def wait_for(self, *texts: bytes, timeout: float = 120) -> bytes:
        """Read until one of ``texts`` has come since the last call; that one."""
        start, deadline = len(self.seen), time.monotonic() + timeout
        while True:
            for text in texts:
                if text in self.seen[start:]:
                    return text
            left = deadline - time.monotonic()
            assert left > 0, f"timed out waiting for {texts}; got {self.seen[-2000:]!r}"
            assert self.closed is None, f"the relay closed: {self.closed!r}"
            self._read(left)

    def wait_closed(self, timeout: float = 60) -> bytes:
        """The close frame's payload, once the relay sent it."""
        deadline = time.monotonic() + timeout
        while self.closed is None:
            left = deadline - time.monotonic()
            assert left > 0, "timed out waiting for the relay to close"
            self._read(left)
        return self.closed
