"""A node's serial socket of an instance, read all the time by a thread.

Reading all the time matters: a client that stops reading (while a gnt-*
command runs, say) fills the socket, QEMU's UART then waits for it, and the
guest blocks on its console: a power-button script that prints before it
powers off never gets there, and a guest migrated in that state stays stuck
on its serial port (QEMU 7.2 does not re-arm the wait on the target).
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from pathlib import Path


class SerialConsole:
    """What an instance printed on its serial port, waited for by content."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(str(path))
        self._text = ""
        self._read_to = 0
        self._ended = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            while data := self.sock.recv(65536):
                with self._changed:
                    self._text += data.decode(errors="replace")
                    self._changed.notify_all()
        except OSError:
            pass  # closed by close()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def wait_for(self, pattern: str | re.Pattern[str], timeout: float = 120) -> re.Match[str]:
        """The first match of ``pattern`` printed after the last match."""
        regex = re.compile(pattern)
        with self._changed:
            self._changed.wait_for(
                lambda: self._ended or regex.search(self._text, self._read_to), timeout
            )
            found = regex.search(self._text, self._read_to)
            if found is None:
                why = "the console closed" if self._ended else "timed out"
                end = self._text[-1000:]
                raise AssertionError(f"{why} before {regex.pattern!r}; its end:\n{end}")
            self._read_to = found.end()
            return found

    def seen(self) -> str:
        """Everything printed so far."""
        with self._changed:
            return self._text

    def close(self) -> None:
        """Stop reading (what was read stays in :meth:`seen`)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(10)
        self.sock.close()
