"""metad's listening sockets: one per communication tap, bound to it, and the
guests' connections on them.

Why one socket per tap (``SO_BINDTODEVICE``) rather than one socket with
``IP_PKTINFO``: for TCP the kernel then does the demultiplexing (a connection
accepted on a tap's socket came in on that tap: the site's tap is the guest's),
answers leave through that tap whatever the routing table says, and a tap that
is gone takes nothing else down.  Every tap carries 169.254.169.254 on the
host side; sockets bound to different devices do not conflict on the same
address and port.

Each connection serves one request, parsed by corral.metad.wire and answered
with bytes the server rendered beforehand; it must send its head and body
within ``request_timeout`` or it is closed, and a tap holds at most
``max_connections`` connections at once (newcomers beyond are closed): a guest
cannot hold the node's descriptors nor starve its neighbours.  A request
refused (malformed, too large) gets its answer, then what the guest still
sends is read and dropped until it closes (or the deadline passes): closing
with data unread would reset the connection, and the answer with it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

from corral.http.accepting import ACCEPT_RETRY_DELAY, BACKLOG, OUT_OF_RESOURCES, error_reason
from corral.metad import wire
from corral.metad.trees import NodeFile

log = logging.getLogger(__name__)

# Bytes read at once: a request's head and a progress write fit.
RECV_SIZE = 65536
OCTETS = "application/octet-stream"

# What the server answers a request with: the whole answer, or a node file to send.
Reply = bytes | NodeFile
# The server's answer to (tap, source address, head, body).
Answerer = Callable[[str, str, wire.Head, bytes], Reply]


@dataclass(frozen=True)
class GuestLimits:
    """What one guest may ask of metad."""

    request_timeout: float = 10.0  # seconds to send a request's head and body
    max_connections: int = 32  # per tap
    max_head_line: int = 4096  # bytes of the request line, and of each header field
    max_headers: int = 32
    max_body: int = 64 * 1024  # bytes (progress lines written by an install)

    def head_limits(self) -> wire.HeadLimits:
        """The bounds of one request."""
        return wire.HeadLimits(self.max_head_line, self.max_headers, self.max_body)


class GuestConnection:
    """One guest's connection, from accept to close: one request, one answer.

    Driven by the loop's readiness callbacks on the socket itself, without a
    transport: a connection costs an accept, a read (the request is mostly
    there at once), a send and a close
    (asyncio's transports cost a task and several callbacks more per
    connection, which 100 guests asking at once wait for in turn)."""

    def __init__(self, site: TapSite, sock: socket.socket, peer: str) -> None:
        self._site = site
        self._sock = sock
        self._fd = sock.fileno()
        self._peer = peer
        self._loop = site.loop
        self._timer: asyncio.TimerHandle | None = self._loop.call_later(
            site.limits.request_timeout, self.close
        )
        self._reading = self._writing = self._closed = False
        self._pending: bytes | bytearray = b""  # the head so far, or the body's start
        self._lines = 0  # line ends in an incomplete head
        self._head: wire.Head | None = None
        self._body: wire.Body | None = None
        self._answered = False  # what arrives from now on is dropped
        self._unsent = memoryview(b"")
        self._then_close = True  # once sent; otherwise linger (a refusal)
        self._task: asyncio.Task[None] | None = None  # a node file being sent
        site.live.add(self)
        self._readable()  # the request may be there already: no wait for readiness then

    def close(self) -> None:
        """Close at once."""
        if self._closed:
            return
        self._closed = True
        self._site.live.discard(self)
        if self._reading:
            self._loop.remove_reader(self._fd)
        if self._writing:
            self._loop.remove_writer(self._fd)
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            self._task.cancel()
        self._sock.close()

    def _read(self, wanted: bool) -> None:
        if wanted != self._reading and not self._closed:
            self._reading = wanted
            if wanted:
                self._loop.add_reader(self._fd, self._readable)
            else:
                self._loop.remove_reader(self._fd)

    def _readable(self) -> None:
        try:
            data = self._sock.recv(RECV_SIZE, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            self._read(True)
            return
        except OSError:
            self.close()
            return
        if not data:  # the guest is done
            self.close()
            return
        if self._answered:
            return  # lingering: dropped
        try:
            body = self._take(data)
        except wire.HttpError as err:
            self._refuse(err)
            return
        if body is None:
            self._read(True)
        else:
            self._answer(body)

    def _take(self, data: bytes) -> bytes | None:
        """The request's body once the request is all in; None while more is due."""
        if self._body is None:
            head = self._head_from(data)
            if head is None:
                return None
            self._head = wire.parse_head(head, self._site.limits_of_head)
            if not self._head.length and not self._head.chunked:
                return b""
            self._body = wire.Body(self._head, self._site.limits.max_body)
            data, self._pending = bytes(self._pending), b""
        return self._body.feed(data)

    def _head_from(self, data: bytes) -> bytes | None:
        """The head once it is all in (what follows it left in ``_pending``)."""
        if not self._pending:
            end = data.find(wire.END_OF_HEAD)
            if end >= 0:  # the usual case: the whole head in one segment
                self._pending = data[end + 4 :]
                return data[:end]
            self._pending = bytearray()
        pending = self._pending
        assert isinstance(pending, bytearray)
        old = len(pending)
        pending += data
        # Only what arrived is searched (with the ends of what was there).
        end = pending.find(wire.END_OF_HEAD, max(0, old - 3))
        if end < 0:
            self._lines += pending.count(wire.CRLF, max(0, old - 1))
            wire.check_partial(pending, self._lines, self._site.limits_of_head)
            return None
        head = bytes(pending[:end])
        self._pending = bytes(pending[end + 4 :])
        return head

    def _answer(self, body: bytes) -> None:
        assert self._head is not None
        self._answered = True
        self._read(False)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        site = self._site
        reply = site.answer(site.tap, self._peer, self._head, body)
        head_only = self._head.method == "HEAD"
        if isinstance(reply, bytes):
            self._send(wire.head_only(reply) if head_only else reply)
        else:
            self._task = self._loop.create_task(self._send_file(reply, head_only))

    def _refuse(self, err: wire.HttpError) -> None:
        """Answer a request not taken; then read and drop the rest until the
        guest closes or the deadline passes."""
        self._answered = True
        self._then_close = False
        self._send(wire.response(err.status, err.message.encode()))
        self._read(True)

    def _send(self, data: bytes) -> None:
        self._unsent = memoryview(data)
        self._writable()

    def _writable(self) -> None:
        try:
            sent = self._sock.send(self._unsent, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self.close()
            return
        self._unsent = self._unsent[sent:]
        if self._unsent:
            if not self._writing:  # a guest reading slowly: bounded in time too
                self._writing = True
                self._loop.add_writer(self._fd, self._writable)
                if self._timer is None:
                    timeout = self._site.limits.request_timeout
                    self._timer = self._loop.call_later(timeout, self.close)
            return
        if self._writing:
            self._writing = False
            self._loop.remove_writer(self._fd)
        if self._then_close:
            self.close()
            return
        try:
            self._sock.shutdown(socket.SHUT_WR)
        except OSError:
            self.close()

    async def _send_file(self, found: NodeFile, head_only: bool) -> None:
        opened = await self._loop.run_in_executor(None, _open_regular, found.path)
        if opened is None:
            log.warning("%s is not there", found.path)
            self._task = None
            self._send(wire.NOT_FOUND_ANSWER)
            return
        file, size = opened
        self._sock.setblocking(False)  # as the loop's sock_* calls need
        try:
            await self._loop.sock_sendall(self._sock, wire.head(200, size, OCTETS))
            if not head_only:
                await self._loop.sock_sendfile(self._sock, file, count=size)
        except OSError:
            pass  # the guest went away
        finally:
            file.close()
            self._task = None
            self.close()


def _open_regular(path: str) -> tuple[BinaryIO, int] | None:
    """``path`` opened with its size if it is a regular file (run off the loop)."""
    try:
        file = open(path, "rb")  # noqa: SIM115 (closed by the caller)
    except OSError:
        return None
    info = os.fstat(file.fileno())
    if not stat.S_ISREG(info.st_mode):
        file.close()
        return None
    return file, info.st_size


class TapSite:
    """``address:port`` on the tap ``tap`` only, answered by ``answer``."""

    def __init__(
        self, tap: str, address: str, port: int, limits: GuestLimits, answer: Answerer
    ) -> None:
        self.tap = tap
        self.limits = limits
        self.limits_of_head = limits.head_limits()
        self.answer = answer
        self.live: set[GuestConnection] = set()
        self.loop = asyncio.get_running_loop()
        self._address = address
        self._port = port
        self._sock: socket.socket | None = None
        self._retry: asyncio.TimerHandle | None = None
        self.ifindex = 0

    @property
    def name(self) -> str:
        return f"http://{self._address}:{self._port} on {self.tap}"

    async def start(self) -> None:
        """Listen; OSError (no such device, address not there) if it cannot."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, self.tap.encode())
            # The socket is bound to this device: a tap made again under the same
            # name is another device, and needs a new socket (see is_current).
            self.ifindex = socket.if_nametoindex(self.tap)
            sock.bind((self._address, self._port))
            sock.listen(BACKLOG)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self.loop.add_reader(sock.fileno(), self._accept)

    async def stop(self) -> None:
        """Stop listening; close the connections still open."""
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        if self._sock is not None:
            self.loop.remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
        for conn in list(self.live):
            conn.close()

    def is_current(self) -> bool:
        """Whether the tap this site listens on is still the one of that name."""
        try:
            return socket.if_nametoindex(self.tap) == self.ifindex
        except OSError:
            return False

    def _accept(self) -> None:
        # One connection per readiness: a tap rarely has two waiting, and the
        # loop calls again while one does (an accept more would mostly fail).
        assert self._sock is not None
        try:
            sock, peer = self._sock.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        except OSError as err:
            if err.errno not in OUT_OF_RESOURCES:
                raise
            # No descriptor to take it: the guests wait in the backlog a while.
            log.warning("Cannot accept on %s: %s", self.name, error_reason(err))
            self.loop.remove_reader(self._sock.fileno())
            self._retry = self.loop.call_later(ACCEPT_RETRY_DELAY, self._resume)
            return
        if len(self.live) >= self.limits.max_connections:
            sock.close()  # beyond the bound: closed at once
            return
        # Left blocking: it is read and written with MSG_DONTWAIT (a syscall less).
        GuestConnection(self, sock, peer[0])

    def _resume(self) -> None:
        self._retry = None
        if self._sock is not None:
            self.loop.add_reader(self._sock.fileno(), self._accept)
