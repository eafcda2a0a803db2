"""A guest booted with ``corral.writer=1`` (tests/data/guest/init): it writes
an increasing counter to the first sector of its first disk, each write
flushed before it prints the value; what tests read back of it."""

from __future__ import annotations

import re
from pathlib import Path

WRITER_ARGS = "corral.writer=1"
# A value the guest's disk acknowledged, its line complete (a line still
# arriving may show "6" of "60").
WROTE = re.compile(r"CORRAL-GUEST-WROTE (\d+)\r?\n")
# The value the guest found on its disk when it started, its line complete
# (the sector's value is padded with spaces).
READ_BACK = r"CORRAL-GUEST-WRITER (\d+) *\r?\n"


def sector_count(path: Path) -> int:
    """The counter the guest last wrote to this copy of its disk."""
    with path.open("rb") as handle:
        return int(handle.read(512).decode().strip() or 0)


def last_written(text: str) -> int:
    """The last value the guest printed as written, on a complete line (0: none yet)."""
    found = [int(value) for value in WROTE.findall(text)]
    return found[-1] if found else 0
