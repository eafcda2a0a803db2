"""Import/export progress as bars on a terminal, as Ganeti's lines elsewhere.

An import or export job logs a line per disk about once a second
("disk/0 sent 512M, 180.3 MiB/s, 45%, ETA 3s", or "Disk 0 sent ..." for a
remote export).  On a terminal those lines would scroll everything else away,
so :class:`ProgressFeedback` keeps one bar line per disk at the bottom,
redrawn in place, with the job's other messages printed above the bars.  When
standard output is not a terminal it prints every line as Ganeti does.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Sequence

from corral.cli import common

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any, TextIO

_PROGRESS = re.compile(
    r"(?P<name>disk/\d+|Disk \d+) sent (?P<amount>\S+), (?P<rate>[\d.]+ MiB/s)"
    r"(?:, (?P<percent>\d+)%)?(?:, ETA (?P<eta>.+))?"
)
# The last line of a disk's transfer: its bar is done.
_END = re.compile(
    r"(?P<name>disk/\d+|Disk \d+) (finished|failed to) (sending|receiving|send|receive)"
)
_BAR_WIDTH = 30
# ANSI: to the start of the line n lines up; clear to the end of the screen.
_UP = "\x1b[{}F"
_CLEAR = "\x1b[J"


def bar_line(name: str, amount: str, rate: str, percent: int | None, eta: str | None) -> str:
    """One disk's bar: ``disk/0 [#############.................]  45% 512M 180.3 MiB/s ETA 3s``
    (without a percentage, the bar is left out)."""
    parts = [name]
    if percent is not None:
        filled = _BAR_WIDTH * min(max(percent, 0), 100) // 100
        parts.append(f"[{'#' * filled}{'.' * (_BAR_WIDTH - filled)}] {percent:3d}%")
    parts += [amount, rate]
    if eta:
        parts.append(f"ETA {eta}")
    return " ".join(parts)


class ProgressFeedback:
    """A job log follower (``common.poll_job``'s ``feedback``) drawing bars
    when ``stream`` is a terminal."""

    def __init__(self, stream: TextIO | None = None, columns: int | None = None) -> None:
        self._stream = stream or sys.stdout
        self._tty = self._stream.isatty()
        self._columns = columns
        self._bars: dict[str, str] = {}
        self._drawn = 0  # bar lines on the screen below the last message

    def __call__(self, entry: Sequence[Any]) -> None:
        _serial, timestamp, kind, message = entry
        text = common.format_log_message(kind, message)
        seconds = timestamp[0] + timestamp[1] / 1e6 if timestamp else time.time()
        line = f"{time.ctime(seconds)} {text}"  # as common.print_feedback
        if not self._tty:
            self._stream.write(line + "\n")
            self._stream.flush()
            return
        progress = _PROGRESS.fullmatch(text)
        if progress is not None:
            percent = progress["percent"]
            self._bars[progress["name"]] = bar_line(
                progress["name"],
                progress["amount"],
                progress["rate"],
                None if percent is None else int(percent),
                progress["eta"],
            )
            self._redraw([])
            return
        ended = _END.match(text)
        if ended is not None:
            self._bars.pop(ended["name"], None)
        self._redraw([line])

    def _terminal_width(self) -> int:
        try:
            return os.get_terminal_size(self._stream.fileno()).columns or 80
        except (OSError, ValueError):
            return 80

    def _redraw(self, lines: list[str]) -> None:
        """Erase the bars, print ``lines``, draw the bars again."""
        out = []
        if self._drawn:
            out.append(_UP.format(self._drawn))
        out.append(_CLEAR)
        out += [line + "\n" for line in lines]
        width = (self._columns or self._terminal_width()) - 1
        out += [bar[:width] + "\n" for bar in self._bars.values()]
        self._drawn = len(self._bars)
        self._stream.write("".join(out))
        self._stream.flush()
