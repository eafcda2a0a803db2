"""Guests' serial consoles, caught the moment QEMU creates their sockets.

QEMU's serial socket (``server=on,wait=off``) drops what the guest prints
while nobody is connected, and Corral creates it somewhere inside a job.  So
a :class:`SocketWatch` follows the socket directory with inotify: when
``<name>.serial`` appears, a thread connects at once and keeps every line with
the time it arrived.  The by-hand baseline is caught exactly the same way.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import select
import socket
import struct
import threading
import time
from pathlib import Path

_IN_CREATE = 0x100
_IN_CLOEXEC = 0o2000000
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then the name
SUFFIX = ".serial"
# Between QEMU's bind() (the inotify event) and its listen(), connect() is
# refused: retried at once, for at most this long.
_CONNECT_WINDOW = 5.0

_libc = ctypes.CDLL(None, use_errno=True)


def _check(value: int, what: str) -> int:
    if value < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return value


class Session:
    """One connection to one guest's serial console: its lines, timed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lines: list[tuple[float, str]] = []  # (time.perf_counter(), line)
        self.connected_at: float | None = None
        self.closed = False
        self.error: str | None = None
        self._changed = threading.Condition()
        self._sock: socket.socket | None = None

    def run(self, path: Path) -> None:
        """Connect to ``path`` and read until the guest's QEMU closes it."""
        try:
            self._sock = _connect(path)
            self.connected_at = time.perf_counter()
            partial = b""
            while chunk := self._sock.recv(65536):
                now = time.perf_counter()
                *done, partial = (partial + chunk).split(b"\n")
                with self._changed:
                    self.lines += [
                        (now, line.decode(errors="replace").rstrip("\r")) for line in done
                    ]
                    self._changed.notify_all()
        except OSError as err:
            self.error = str(err)
        finally:
            if self._sock is not None:
                self._sock.close()
            with self._changed:
                self.closed = True
                self._changed.notify_all()

    def wait_for(self, text: str, timeout: float = 300.0) -> float:
        """When the first line containing ``text`` arrived (perf_counter)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for at, line in self.lines:
                    if text in line:
                        return at
                if self.closed:
                    raise RuntimeError(
                        f"{self.name}: console closed before {text!r}: {self.tail()}"
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._changed.wait(remaining):
                    raise TimeoutError(f"{self.name}: no {text!r} on the console: {self.tail()}")

    def wait_closed(self, timeout: float = 300.0) -> None:
        """Until the guest's QEMU has closed the console (it exited)."""
        with self._changed:
            if not self._changed.wait_for(lambda: self.closed, timeout):
                raise TimeoutError(f"{self.name}: the console is still open")

    def tail(self) -> str:
        return self.error or " | ".join(line for _, line in self.lines[-5:])

    def close(self) -> None:
        """Hang up (the reading thread ends)."""
        if self._sock is not None:
            with contextlib.suppress(OSError):  # QEMU hung up first
                self._sock.shutdown(socket.SHUT_RDWR)


def _connect(path: Path) -> socket.socket:
    deadline = time.monotonic() + _CONNECT_WINDOW
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(path))
            return sock
        except (ConnectionRefusedError, FileNotFoundError):
            sock.close()
            if time.monotonic() > deadline:
                raise
            os.sched_yield()


class SocketWatch:
    """Watches one directory; :meth:`expect` a guest before it starts."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fd = _check(_libc.inotify_init1(_IN_CLOEXEC), "inotify_init1")
        _check(
            _libc.inotify_add_watch(self._fd, os.fsencode(directory), _IN_CREATE),
            f"inotify_add_watch {directory}",
        )
        self._stop_r, self._stop_w = os.pipe()
        self._lock = threading.Lock()
        self._expected: dict[str, Session] = {}
        self._thread = threading.Thread(target=self._watch, name="serial-watch", daemon=True)
        self._thread.start()

    def expect(self, name: str) -> Session:
        """The session the next ``<name>.serial`` created will be read into."""
        session = Session(name)
        with self._lock:
            self._expected[name] = session
        return session

    def _watch(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._stop_r, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if self._stop_r in ready:
                return
            try:
                data = os.read(self._fd, 65536)
            except OSError as err:
                if err.errno == errno.EINTR:
                    continue
                raise
            for name in _created(data):
                self._created(name)

    def _created(self, filename: str) -> None:
        if not filename.endswith(SUFFIX):
            return
        with self._lock:
            session = self._expected.pop(filename.removesuffix(SUFFIX), None)
        if session is not None:
            path = self.directory / filename
            threading.Thread(target=session.run, args=(path,), daemon=True).start()

    def close(self) -> None:
        os.write(self._stop_w, b"x")
        self._thread.join()
        for fd in (self._fd, self._stop_r, self._stop_w):
            os.close(fd)


def _created(data: bytes) -> list[str]:
    names = []
    offset = 0
    while offset < len(data):
        _, _, _, length = _EVENT.unpack_from(data, offset)
        start = offset + _EVENT.size
        names.append(data[start : start + length].rstrip(b"\0").decode(errors="replace"))
        offset = start + length
    return names
