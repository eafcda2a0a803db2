"""metad's listening sockets: one per communication tap, bound to it.

Why one socket per tap (``SO_BINDTODEVICE``) rather than one socket with
``IP_PKTINFO``: for TCP the kernel then does the demultiplexing, the accepted
connection inherits the device (the handler reads it back from the socket,
not from our bookkeeping), answers leave through that tap whatever the routing
table says, and a tap that is gone takes nothing else down.  Every tap carries
169.254.169.254 on the host side; sockets bound to different devices do not
conflict on the same address and port.

Each connection serves one request; it must send its head and body within
``request_timeout`` or it is closed, and a tap holds at most
``max_connections`` connections at once (newcomers beyond are closed): a guest
cannot hold the node's descriptors nor starve its neighbours.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from corral.http.accepting import BACKLOG

# Linux's IFNAMSIZ: interface names are at most 15 bytes and a NUL.
IFNAMSIZ = 16


@dataclass(frozen=True)
class GuestLimits:
    """What one guest may ask of metad."""

    request_timeout: float = 10.0  # seconds to send a request's head and body
    max_connections: int = 32  # per tap
    max_head_line: int = 4096  # bytes of the request line, and of each header field
    max_headers: int = 32
    max_body: int = 64 * 1024  # bytes (progress lines written by an install)


def bound_device(sock: socket.socket) -> str:
    """The interface a socket is bound to ('' if none)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, IFNAMSIZ)
    return raw.split(b"\0", 1)[0].decode()


class Deadlines:
    """The connections still sending their request, each with its deadline."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._timers: dict[RequestHandler, asyncio.TimerHandle] = {}

    def start(self, proto: RequestHandler) -> None:
        loop = asyncio.get_running_loop()
        self._timers[proto] = loop.call_later(self.timeout, self._expire, proto)

    def received(self, proto: object) -> None:
        """The request of ``proto`` arrived whole: its deadline goes."""
        timer = self._timers.pop(proto, None)  # type: ignore[call-overload]
        if timer is not None:
            timer.cancel()

    def _expire(self, proto: RequestHandler) -> None:
        self._timers.pop(proto, None)
        if proto.transport is not None:
            proto.transport.close()


class _Refused(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()


class _Counted(asyncio.Protocol):
    """aiohttp's protocol, counted in ``live`` from connection to loss."""

    def __init__(self, inner: RequestHandler, live: set[_Counted]) -> None:
        self._inner = inner
        self._live = live
        live.add(self)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._live.discard(self)
        self._inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> None:
        self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class TapSite(web.BaseSite):
    """The runner's application on ``address:port`` of the tap ``tap`` only."""

    def __init__(
        self,
        runner: web.BaseRunner,
        tap: str,
        address: str,
        port: int,
        *,
        deadlines: Deadlines,
        max_connections: int,
    ) -> None:
        super().__init__(runner, backlog=BACKLOG)
        self.tap = tap
        self._address = address
        self._port = port
        self._deadlines = deadlines
        self._max = max_connections
        self._live: set[_Counted] = set()
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
            sock.listen(self._backlog)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        await super().start()
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._connection, sock=sock)

    def is_current(self) -> bool:
        """Whether the tap this site listens on is still the one of that name."""
        try:
            return socket.if_nametoindex(self.tap) == self.ifindex
        except OSError:
            return False

    def _connection(self) -> asyncio.Protocol:
        server = self._runner.server
        assert server is not None
        if len(self._live) >= self._max:
            return _Refused()
        proto = server()
        self._deadlines.start(proto)
        return _Counted(proto, self._live)
