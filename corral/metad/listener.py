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

from corral.http.accepting import BACKLOG
from corral.metad import wire
from corral.metad.trees import NodeFile

log = logging.getLogger(__name__)

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

    def head(self) -> wire.HeadLimits:
        """The bounds of one request."""
        return wire.HeadLimits(self.max_head_line, self.max_headers, self.max_body)


class _Refused(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()


class GuestConnection(asyncio.Protocol):
    """One guest's connection, from accept to close: one request, one answer."""

    def __init__(self, site: TapSite) -> None:
        self._site = site
        site.live.add(self)  # counted from the accept on: a burst is bounded too
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._peer = ""
        self._pending: bytes | bytearray = b""  # the head so far, or the body's start
        self._lines = 0  # line ends in an incomplete head
        self._head: wire.Head | None = None
        self._body: wire.Body | None = None
        self._answered = False  # what arrives from now on is dropped
        self._task: asyncio.Task[None] | None = None  # a node file being sent

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self._peer = peer[0] if peer else ""
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._site.limits.request_timeout, self.abort)

    def connection_lost(self, exc: Exception | None) -> None:
        self._site.live.discard(self)
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            self._task.cancel()
        self._transport = self._task = self._timer = None

    def eof_received(self) -> bool | None:
        return self._task is not None  # keep sending a file to a half-closed guest

    def abort(self) -> None:
        """Close at once."""
        if self._transport is not None:
            self._transport.abort()

    def data_received(self, data: bytes) -> None:
        if self._answered:
            return
        try:
            body = self._take(data)
        except wire.HttpError as err:
            self._refuse(err)
            return
        if body is not None:
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
        assert self._head is not None and self._transport is not None
        self._answered = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        site = self._site
        reply = site.answer(site.tap, self._peer, self._head, body)
        head_only = self._head.method == "HEAD"
        if isinstance(reply, bytes):
            self._transport.write(wire.head_only(reply) if head_only else reply)
            self._transport.close()
            return
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._send_file(reply, head_only))

    def _refuse(self, err: wire.HttpError) -> None:
        """Answer a request not taken; read and drop the rest until the guest
        closes or the deadline passes."""
        assert self._transport is not None
        self._answered = True
        self._transport.write(wire.response(err.status, err.message.encode()))
        self._transport.write_eof()

    async def _send_file(self, found: NodeFile, head_only: bool) -> None:
        loop = asyncio.get_running_loop()
        opened = await loop.run_in_executor(None, _open_regular, found.path)
        transport = self._transport
        if transport is None:
            if opened is not None:
                opened[0].close()
            return
        if opened is None:
            log.warning("%s is not there", found.path)
            transport.write(wire.NOT_FOUND_ANSWER)
            transport.close()
            return
        file, size = opened
        try:
            transport.write(wire.head(200, size, "application/octet-stream"))
            if not head_only:
                await loop.sendfile(transport, file, count=size)
            transport.close()
        except (OSError, RuntimeError):  # the guest went away
            transport.abort()
        finally:
            file.close()
            self._task = None


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
        self.limits_of_head = limits.head()
        self.answer = answer
        self.live: set[GuestConnection] = set()
        self._address = address
        self._port = port
        self._server: asyncio.Server | None = None
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
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._connection, sock=sock, backlog=BACKLOG)

    async def stop(self) -> None:
        """Stop listening; close the connections still open."""
        if self._server is not None:
            self._server.close()
            for conn in list(self.live):
                conn.abort()
            await self._server.wait_closed()
            self._server = None

    def is_current(self) -> bool:
        """Whether the tap this site listens on is still the one of that name."""
        try:
            return socket.if_nametoindex(self.tap) == self.ifindex
        except OSError:
            return False

    def _connection(self) -> asyncio.Protocol:
        if len(self.live) >= self.limits.max_connections:
            return _Refused()
        return GuestConnection(self)
