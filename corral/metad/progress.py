"""The progress lines an install reports to metad (``POST /ganeti/latest/write``),
kept per instance in memory, bounded, until noded fetches them for the job log."""

from __future__ import annotations

from collections import deque

# Lines kept per instance; older ones are dropped (and counted).
MAX_LINES = 1000
# Characters kept of one line.
MAX_LINE = 1000


class ProgressLog:
    """An instance's progress lines, oldest first, at most :data:`MAX_LINES`."""

    def __init__(self, max_lines: int = MAX_LINES) -> None:
        self._lines: deque[str] = deque(maxlen=max_lines)
        self.dropped = 0

    def add(self, text: str) -> int:
        """Keep each non-empty line of ``text`` (cut at :data:`MAX_LINE`); how many."""
        added = 0
        for line in text.splitlines():
            line = line.rstrip()
            if not line:
                continue
            if len(self._lines) == self._lines.maxlen:
                self.dropped += 1
            self._lines.append(line[:MAX_LINE])
            added += 1
        return added

    def lines(self) -> list[str]:
        """The lines kept, oldest first (a copy)."""
        return list(self._lines)

    def take(self) -> list[str]:
        """The lines kept, oldest first, after a note of how many were dropped if
        any; they are forgotten (each reaches the job log once)."""
        lines = list(self._lines)
        if self.dropped:
            lines.insert(0, f"({self.dropped} earlier progress lines dropped)")
        self._lines.clear()
        self.dropped = 0
        return lines
