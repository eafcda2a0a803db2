"""gnt-backup's job follower: on a terminal (a real pty) import/export progress
lines become one bar per disk, redrawn in place, with the job's other messages
above them; elsewhere every line is printed as Ganeti prints it."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import time
from typing import Any

from corral.cli.common import print_feedback
from corral.cli.progress import ProgressFeedback, bar_line

_ESCAPE = re.compile(r"\x1b\[(\d*)([FJ])")
T0 = (1764036000, 0)
_MARK = "<end of output>"


def entry(serial: int, message: str) -> list[Any]:
    return [serial, [T0[0] + serial, 0], "message", message]


def screen(text: str) -> list[str]:
    """The lines a terminal shows after ``text``: enough of a terminal for
    "n lines up, to column 0" (ESC [ n F) and "clear to the end" (ESC [ J)."""
    lines: list[str] = [""]
    row = 0
    pos = 0
    for match in _ESCAPE.finditer(text):
        row = _write(lines, row, text[pos : match.start()])
        if match[2] == "F":
            row = max(row - int(match[1] or 1), 0)
            lines[row] = ""
        else:  # J: clear from the cursor (at column 0 here) to the end
            del lines[row + 1 :]
            lines[row] = ""
        pos = match.end()
    _write(lines, row, text[pos:])
    return [line for line in lines if line]


def _write(lines: list[str], row: int, text: str) -> int:
    for char in text:
        if char == "\n":
            row += 1
            if row == len(lines):
                lines.append("")
        else:
            lines[row] += char
    return row


MESSAGES = [
    "Exporting snapshot/0 from node1.example.com to node1.example.com",
    "disk/0 is now listening, starting export",
    "disk/1 is now listening, starting export",
    "disk/0 sent 64M, 60.0 MiB/s, 12%, ETA 8s",
    "disk/1 sent 32M, 30.0 MiB/s, 6%, ETA 16s",
    "disk/0 sent 256M, 120.5 MiB/s, 50%, ETA 2s",
    "disk/1 sent 1.0G, 150.0 MiB/s, 99%, ETA 1m 3s",
    "disk/0 finished sending data",
    "Disk 2 sent 8M, 1.5 MiB/s",
]


def test_bars_on_a_terminal() -> None:
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as stream:
            follower = ProgressFeedback(stream, columns=120)
            for serial, message in enumerate(MESSAGES[:7]):
                follower(entry(serial, message))
            written = _read(master, stream)
            mid = screen(written)
            for serial, message in enumerate(MESSAGES[7:], start=7):
                follower(entry(serial, message))
            end = screen(written + _read(master, stream))
    finally:
        os.close(master)
        os.close(slave)
    stamp = time.ctime(T0[0] + 1)
    # The plain messages, then exactly one (the latest) bar per disk.
    assert [line.split(" ", 5)[-1] for line in mid[:3]] == MESSAGES[:3]
    assert mid[1].startswith(stamp)
    assert mid[3:] == [
        bar_line("disk/0", "256M", "120.5 MiB/s", 50, "2s"),
        bar_line("disk/1", "1.0G", "150.0 MiB/s", 99, "1m 3s"),
    ]
    assert mid[3] == "disk/0 [###############...............]  50% 256M 120.5 MiB/s ETA 2s"
    # disk/0 ended: its bar is gone, its last message printed; Disk 2 has no percentage.
    assert [line.split(" ", 5)[-1] for line in end[3:4]] == ["disk/0 finished sending data"]
    assert end[4:] == [
        bar_line("disk/1", "1.0G", "150.0 MiB/s", 99, "1m 3s"),
        "Disk 2 8M 1.5 MiB/s",
    ]


def _read(fd: int, stream: Any) -> str:
    """What has been written to the pty so far (the line discipline's \\r\\n as
    \\n): up to a marker written after it."""
    stream.write(_MARK)
    stream.flush()
    data = b""
    while not data.endswith(_MARK.encode()):
        ready, _, _ = select.select([fd], [], [], 30)
        assert ready, f"nothing more from the pty after {data!r}"
        data += os.read(fd, 65536)
    return data.decode().removesuffix(_MARK).replace("\r\n", "\n")


def test_plain_lines_elsewhere(capsys: Any) -> None:
    out = io.StringIO()  # not a terminal: every line as Ganeti prints it
    follower = ProgressFeedback(out)
    for serial, message in enumerate(MESSAGES):
        follower(entry(serial, message))
    ours = out.getvalue()
    for serial, message in enumerate(MESSAGES):
        print_feedback(entry(serial, message))
    assert ours == capsys.readouterr().out
    assert ours.count("\n") == len(MESSAGES) and "\x1b" not in ours
