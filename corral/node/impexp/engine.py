"""The threads that move one stream, and its status.

Export: a reader thread takes each piece of the source (into a ring of
page-aligned buffers, or straight from the page cache), hashes and
compresses it; the sending thread writes it to the TLS socket.  Import: the
receiving thread reads each frame straight into a ring buffer, a writer
thread decompresses, hashes and writes it.  Blocking sockets: OpenSSL
releases the GIL while it encrypts, decrypts and does the I/O, as do the
hash, the compressors and the disk I/O, so both threads of each end run at
once; no asyncio and no per-byte Python work.

On a machine where both ends share two cores (the benchmark's) the stream
is CPU-bound: the pipe alone keeps both cores busy, so whatever else the
ends do (reading, hashing, writing) comes off the pipe's speed; with cores
to spare the helper threads run beside the TLS work instead.

A failure anywhere (or an abort) wakes every thread: the socket is shut
down, the script killed, the queues get a stop mark.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import mmap
import queue
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

import xxhash

from corral import errors
from corral.node.impexp import channel, wire
from corral.node.impexp.sinks import Sink
from corral.node.impexp.sources import Source

log = logging.getLogger(__name__)

MIB = 1024 * 1024
# Buffers in flight per stream (4 MiB each): one being filled, one being sent or
# written, spares that absorb the jitter between the network and the disk.
RING = 8
RECENT_LINES = 20
# Throughput is measured over this many seconds.
WINDOW = 10.0
END, _STOP = object(), object()


class Stopped(Exception):
    """Another thread failed or the stream was aborted (the reason is recorded)."""


class _Hash(Protocol):
    def update(self, data: Any) -> None: ...

    def digest(self) -> bytes: ...


# Errors that say only that the other end went away: its own status has the cause.
_PEER_GONE = (
    wire.PeerClosed,
    ssl.SSLEOFError,
    ConnectionResetError,
    BrokenPipeError,
    ConnectionAbortedError,
)

# How a stream failed (status "failure"): on its own, because its peer went
# away, or aborted by the master.
OWN, PEER, ABORTED = "own", "peer", "aborted"


def failure_kind(err: BaseException) -> str:
    """OWN, or PEER if ``err`` says only that the other end went away."""
    return PEER if isinstance(err, _PEER_GONE) else OWN


def text(err: BaseException) -> str:
    if isinstance(err, errors.GenericError):
        return err.message
    if isinstance(err, ssl.SSLError):
        return f"TLS error: {err.reason or err}"
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    return str(err) or err.__class__.__name__


_PR_SET_NAME = 15
_LIBC = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def name_thread(name: str) -> None:
    """Name the calling thread for the OS (``top -H``, ``/proc/<pid>/task/*/comm``):
    where a stream's CPU goes can then be told apart (at most 15 bytes)."""
    _LIBC.prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)


class Gate:
    """Test-only: while closed, exports pause after their first frame."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.closed = False

    def set(self, closed: bool) -> None:
        with self._cond:
            self.closed = closed
            self._cond.notify_all()

    def passage(self, stream: ImpExp) -> None:
        with self._cond:
            while self.closed and not stream.stopped.is_set():
                self._cond.wait()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()


GATE = Gate()


class ImpExp:
    """One import or export: its threads' shared state and its status."""

    def __init__(self, name: str, mode: str, component: str, size: int | None) -> None:
        self.name, self.mode, self.component, self.size = name, mode, component, size
        self.recent: deque[str] = deque(maxlen=RECENT_LINES)
        self.listen_port: int | None = None
        self.connected = False
        self.moved = 0  # uncompressed bytes, set by one thread only
        self.exit_status: int | None = None
        self.error: str | None = None
        self.failure: str | None = None  # OWN, PEER or ABORTED with the error
        self.stopped = threading.Event()
        self.sock: socket.socket | None = None
        self.listener: socket.socket | None = None
        self.endpoint: Source | Sink | None = None
        self.thread: threading.Thread | None = None
        # The queues between the stream's threads: a stop mark wakes their readers.
        self.queues: list[queue.SimpleQueue[Any]] = []
        self._lock = threading.Lock()
        self._samples: deque[tuple[float, int]] = deque()
        # When the data started to flow (the peer accepted) and when it ended.
        self.connected_at: float | None = None
        self.ended_at: float | None = None
        # Called (from the stream's thread) once it ended: impexp_wait's wake-ups.
        self._watchers: list[Callable[[], None]] = []

    def note(self, line: str) -> None:
        """A line for ``recent_output`` (script messages, channel events)."""
        self.recent.append(line.rstrip()[:500])

    def set_size(self, size: int) -> None:
        """The stream's size in bytes (the export script's estimate wins)."""
        if size >= 0:
            self.size = size

    def fail(self, message: str, kind: str = OWN) -> None:
        """Record the first failure (``kind``: see ``failure_kind``) and wake
        every thread of the stream."""
        with self._lock:
            if self.exit_status is not None:
                return  # over already: nothing to stop
            if self.error is None:
                self.error, self.failure = message, kind
                self.note(message)
        self.stopped.set()
        channel.shut(self.sock)
        channel.shut(self.listener)
        for waiting in self.queues:
            waiting.put(_STOP)
        kill = getattr(self.endpoint, "kill", None)
        if kill is not None:
            kill()
        GATE.wake()

    def abort(self) -> None:
        """Stop the stream (its status ends with a failure)."""
        self.fail("Aborted", ABORTED)

    def run(self, body: Callable[[ImpExp], None]) -> None:
        """Run ``body`` in the stream's thread; its end sets the exit status."""

        def main() -> None:
            name_thread(f"ie-{self.mode[:3]}-main")
            try:
                body(self)
            except Stopped:
                pass
            except Exception as err:  # recorded as the stream's failure
                if not isinstance(err, errors.GenericError | OSError | ssl.SSLError):
                    log.exception("Import/export %s failed", self.name)
                self.fail(text(err), failure_kind(err))
            finally:
                with self._lock:
                    self.ended_at = time.monotonic()
                    self.exit_status = 0 if self.error is None else 1
                    self.stopped.set()
                    watchers, self._watchers = self._watchers, []
                # The buffers (32 MiB) go now, not when the record is forgotten.
                self.queues, self.endpoint = [], None
                for wake in watchers:
                    wake()

        self.thread = threading.Thread(target=main, name=f"impexp {self.name}", daemon=True)
        self.thread.start()

    def watch(self, wake: Callable[[], None]) -> bool:
        """Have ``wake`` called once the stream ended (from its thread); False,
        without calling it, if the stream ended already."""
        with self._lock:
            if self.exit_status is not None:
                return False
            self._watchers.append(wake)
            return True

    def unwatch(self, wake: Callable[[], None]) -> None:
        """Forget ``wake`` (its waiter went away before the end)."""
        with self._lock, contextlib.suppress(ValueError):
            self._watchers.remove(wake)

    def status(self) -> dict[str, Any]:
        """Ganeti's ImportExportStatus fields."""
        now, moved = time.monotonic(), self.moved
        samples = self._samples
        samples.append((now, moved))
        while len(samples) > 2 and now - samples[0][0] > WINDOW:
            samples.popleft()
        throughput = None
        if self.ended_at is not None and self.connected_at is not None:
            # Over: the whole stream's average.
            samples = deque([(self.connected_at, 0), (self.ended_at, moved)])
        if len(samples) >= 2 and samples[-1][0] > samples[0][0]:
            first, last = samples[0], samples[-1]
            throughput = (last[1] - first[1]) / MIB / (last[0] - first[0])
        percent = eta = None
        if self.size:
            percent = max(0, min(100, int(100 * moved / self.size)))
            if throughput:
                eta = max(0, round((self.size - moved) / MIB / throughput))
        return {
            "recent_output": list(self.recent),
            "listen_port": self.listen_port,
            "connected": self.connected,
            "progress_mbytes": moved / MIB if self.connected else None,
            "progress_throughput": throughput,
            "progress_eta": eta,
            "progress_percent": percent,
            "exit_status": self.exit_status,
            "error_message": self.error,
            # Corral's extra: OWN, PEER or ABORTED (which end's error is the cause).
            "failure": self.failure,
            # Corral's extra: seconds from the connection to the end (or now).
            "elapsed": self._elapsed(now),
        }

    def _elapsed(self, now: float) -> float | None:
        if self.connected_at is None:
            return None
        return round((self.ended_at or now) - self.connected_at, 4)

    def set_connected(self, line: str) -> None:
        """The peer accepted: the data starts to flow."""
        self.connected_at = time.monotonic()
        # The throughput's window starts here, not when the import started listening.
        self._samples.clear()
        self._samples.append((self.connected_at, 0))
        self.connected = True
        self.note(line)

    def check(self) -> None:
        """Raise Stopped if the stream was stopped."""
        if self.stopped.is_set():
            raise Stopped()


def queues(stream: ImpExp) -> tuple[queue.SimpleQueue[Any], queue.SimpleQueue[Any]]:
    """The ring of free buffers (all of them, at first) and the queue of full ones."""
    free: queue.SimpleQueue[Any] = queue.SimpleQueue()
    full: queue.SimpleQueue[Any] = queue.SimpleQueue()
    for _ in range(RING):
        free.put(mmap.mmap(-1, wire.FRAME))
    stream.queues += [free, full]
    if stream.stopped.is_set():
        raise Stopped()
    return free, full


def helper(stream: ImpExp, name: str, work: Callable[[], None]) -> threading.Thread:
    """A second thread of the stream; its failure fails the stream."""

    def main() -> None:
        name_thread(f"ie-{stream.mode[:3]}-{name}")
        try:
            work()
        except Stopped:
            pass
        except Exception as err:  # the stream's failure
            stream.fail(text(err), failure_kind(err))

    thread = threading.Thread(target=main, name=f"{name} {stream.name}", daemon=True)
    thread.start()
    return thread


def get(stream: ImpExp, q: queue.SimpleQueue[Any]) -> Any:
    item = q.get()
    if item is _STOP:
        q.put(_STOP)  # for anyone else waiting on it
        stream.check()
        raise Stopped()
    return item


def new_hash(hashed: bool) -> _Hash | None:
    """The digest of the uncompressed data (XXH3-128: about 20 GB/s, and TLS
    authenticates the bytes already; it checks the pipelines on both ends)."""
    return xxhash.xxh3_128() if hashed else None
