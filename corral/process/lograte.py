"""Rate-limited logging: a flood of one error must not fill the disk.

A connection flood makes the same message (a failed accept, a failed TLS
handshake) repeat thousands of times a second.  :class:`RateLimitFilter` lets
the first ``burst`` records of a kind through per ``interval`` seconds; the
rest are counted, and one "Suppressed K similar messages" line says so once
the interval is over.  A *kind* is the logger, the level and the message
template (before its arguments are filled in), so "TLS handshake with %s
failed" is one kind whatever the peer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

# Records of one kind let through per interval, and the interval in seconds.
LOG_BURST = 10
LOG_INTERVAL = 60.0
# How often (s) windows that ended are looked for, when records arrive.
_SWEEP_EVERY = 1.0

_Kind = tuple[str, int, str]


@dataclass
class _Window:
    start: float
    passed: int = 0
    suppressed: int = 0


class RateLimitFilter(logging.Filter):
    """A filter of one handler: at most ``burst`` records of a kind per ``interval``.

    The summary line of a kind is written (through ``handler``) by the first
    record of any kind that arrives after the kind's interval ended.
    """

    def __init__(
        self,
        handler: logging.Handler,
        burst: int = LOG_BURST,
        interval: float = LOG_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self._handler = handler
        self._burst = burst
        self._interval = interval
        self._clock = clock
        self._windows: dict[_Kind, _Window] = {}
        self._last_sweep = clock()

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether ``record`` is written; counts the ones that are not."""
        if getattr(record, "rate_limit_summary", False):
            return True
        now = self._clock()
        if now - self._last_sweep >= _SWEEP_EVERY:
            self._sweep(now)
        kind = (record.name, record.levelno, str(record.msg))
        window = self._windows.get(kind)
        if window is None or now - window.start >= self._interval:
            if window is not None:
                self._summarise(kind, window)
            window = self._windows[kind] = _Window(now)
        if window.passed < self._burst:
            window.passed += 1
            return True
        window.suppressed += 1
        return False

    def _sweep(self, now: float) -> None:
        """Summarise and forget the windows that ended (the dict stays small)."""
        self._last_sweep = now
        for kind, window in list(self._windows.items()):
            if now - window.start >= self._interval:
                del self._windows[kind]
                self._summarise(kind, window)

    def _summarise(self, kind: _Kind, window: _Window) -> None:
        if not window.suppressed:
            return
        name, level, template = kind
        record = logging.LogRecord(
            name,
            level,
            __file__,
            0,
            "Suppressed %d similar messages in %g s: %s",
            (window.suppressed, self._interval, template),
            None,
        )
        record.rate_limit_summary = True
        self._handler.handle(record)


def rate_limit(handler: logging.Handler) -> logging.Handler:
    """``handler`` with a :class:`RateLimitFilter` of its own (as each counts for itself)."""
    handler.addFilter(RateLimitFilter(handler))
    return handler
