"""One client connection of corral-rapi: HTTP/1.1 (h11), with a deadline on
every wait for the client.

A connection goes through phases (see :class:`Phase`).  In those where it
waits on its client (the TLS handshake, a request's head or body, the client
reading an answer) it has a deadline and its owner may close it for a
newcomer; while the application works on a request it has neither.  Requests
on one connection are answered one at a time; what a client sends meanwhile
waits, unread, in the kernel.
"""

from __future__ import annotations

import asyncio
import email.utils
import enum
import logging
import random
import socket
import ssl
import time
from dataclasses import dataclass
from http import HTTPStatus
from typing import Protocol

import h11

from corral.rapi.httpd.messages import Application, BodyError, Request, Response
from corral.rapi.httpd.tls import ServerTls
from corral.rapi.limits import DEADLINE_SPREAD, RapiLimits

log = logging.getLogger(__name__)
access_log = logging.getLogger("corral.rapi.access")

# The largest request head (request line and header fields) taken.
MAX_HEAD = 16 * 1024


class Phase(enum.Enum):
    HANDSHAKE = "handshake"  # the TLS handshake
    IDLE = "idle"  # no byte yet of the next request
    HEAD = "head"  # a request's head is arriving
    BUSY = "busy"  # the application works on a request
    BODY = "body"  # the application reads the request's body
    SENDING = "sending"  # the client reads the answer
    LINGER = "linger"  # answered early: the rest of the body is read and dropped
    CLOSING = "closing"  # closed by the server, the close under way
    CLOSED = "closed"


# The phases in which the connection waits on its client.
WAITING = frozenset(Phase) - {Phase.BUSY, Phase.CLOSED}
# Of those, the ones in which the client sends nothing (once it spoke, a
# connection in its handshake is no longer silent).
SILENT = frozenset({Phase.HANDSHAKE, Phase.IDLE, Phase.CLOSING})


class Owner(Protocol):
    """Who keeps count of the connections (the listener)."""

    def update(self, conn: HttpConnection) -> None:
        """``conn`` changed phase, or became authenticated."""


@dataclass(frozen=True)
class ConnectionSettings:
    """What every connection of a server shares."""

    app: Application
    owner: Owner
    limits: RapiLimits
    max_body: int
    tls: ssl.SSLContext | None


class HttpConnection(asyncio.Protocol):
    """The HTTP side of one accepted socket, from accept to close."""

    def __init__(self, settings: ConnectionSettings, peer: str) -> None:
        self._settings = settings
        self.peer = peer
        self.authenticated = False
        self.phase = Phase.HANDSHAKE
        self._loop = asyncio.get_running_loop()
        # Since when the connection waits on its client (None: it does not).
        self.waiting_since: float | None = self._loop.time()
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        self._silent: socket.socket | None = None  # accepted, nothing received yet
        self._spoken = False  # the client sent its first bytes
        self._starting: asyncio.Task[object] | None = None
        self._socket: asyncio.Transport | None = None  # under TLS, if any
        self._transport: asyncio.Transport | None = None  # what HTTP reads and writes
        self.task: asyncio.Task[None] | None = None  # the request in progress
        # When the current wait ends (loop time; None: no deadline); the
        # owner looks at every connection's deadline a few times a second.
        self.deadline: float | None = None
        # The owner's record of where it lists this connection.
        self.listed: tuple[bool, bool] | None = None
        self._wakeup: asyncio.Future[None] | None = None
        self._request: Request | None = None
        self._write_paused = False
        self._timed_out = False

    # -- life cycle ------------------------------------------------------------

    def start(self, sock: socket.socket) -> None:
        """Take over the accepted ``sock``.  TLS begins once the client sends
        its first bytes: until then the connection costs only its socket
        (a TLS session waiting for a handshake holds some 50 KiB)."""
        if self._settings.tls is None:
            self._connect(sock)
            return
        self._silent = sock
        self._loop.add_reader(sock.fileno(), self._spoke)
        self.deadline = self._deadline(self._settings.limits.handshake_timeout)

    def _spoke(self) -> None:
        sock, self._silent = self._silent, None
        if sock is not None:
            self._loop.remove_reader(sock.fileno())
            self._spoken = True
            self.waiting_since = self._loop.time()  # from now on it waits in another way
            self._settings.owner.update(self)
            self._connect(sock)

    @property
    def active(self) -> bool:
        """Whether the client is sending something (a handshake, a request) or
        reading, rather than doing nothing: such connections are closed for
        newcomers only after the idle ones."""
        if self.phase is Phase.HANDSHAKE:
            return self._spoken or self._settings.tls is None
        return self.phase not in SILENT

    def _connect(self, sock: socket.socket) -> None:
        tls = self._settings.tls
        protocol: asyncio.BaseProtocol = self
        if tls is not None:
            limits = self._settings.limits
            protocol = ServerTls(self, self, tls, limits.handshake_timeout, limits.request_timeout)
        connect = self._loop.connect_accepted_socket(lambda: protocol, sock)
        self._starting = self._loop.create_task(connect)
        self._starting.add_done_callback(lambda task: self._started(task, sock))

    def _started(self, task: asyncio.Task[object], sock: socket.socket) -> None:
        self._starting = None
        if not task.cancelled() and task.exception() is None:
            return
        if self._socket is None:  # no transport took the socket over
            sock.close()
            self._lost()

    def socket_made(self, transport: asyncio.BaseTransport) -> None:
        """The socket's transport exists (under TLS, if any)."""
        assert isinstance(transport, asyncio.Transport)
        self._socket = transport
        if self.phase is Phase.CLOSED:  # aborted before this
            transport.abort()

    def socket_lost(self) -> None:
        """The socket is closed."""
        self._lost()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        if self._socket is None:  # plain HTTP: no TLS layer in between
            self.socket_made(transport)
        self._transport = transport
        # The first request's head is due within the request time-out.
        self._enter(Phase.IDLE, self._settings.limits.request_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost()

    def eof_received(self) -> bool | None:
        return None  # the client is done: close (TLS has no half-close anyway)

    def abort(self) -> None:
        """Close at once, whatever the phase."""
        transport, sock, starting = self._transport, self._socket, self._starting
        silent = self._silent
        self._lost()
        if transport is not None:
            transport.abort()
        elif sock is not None:
            sock.abort()
        elif starting is not None:
            starting.cancel()
        elif silent is not None:
            self._loop.remove_reader(silent.fileno())
            silent.close()

    def close(self) -> None:
        """Close once what was written is sent (within the request time-out)."""
        if self._transport is None or self.phase in (Phase.CLOSING, Phase.CLOSED):
            return
        self._enter(Phase.CLOSING, self._settings.limits.request_timeout)
        self._transport.close()

    def _lost(self) -> None:
        if self.phase is Phase.CLOSED:
            return
        self._enter(Phase.CLOSED)
        if self.task is not None:
            self.task.cancel()
        self._wake()
        # No cycle through the transports or the cancelled request (whose
        # error's traceback holds this connection): the memory goes back at
        # once, not at the garbage collector's next full pass.
        self._transport = self._socket = self.task = None
        self._request = self._silent = None

    def _enter(self, phase: Phase, timeout: float | None = None) -> None:
        """Move to ``phase``, whose wait (if any) ends ``timeout`` s from now."""
        self.phase = phase
        if phase not in WAITING:
            self.waiting_since = None
        elif self.waiting_since is None:
            self.waiting_since = self._loop.time()
        self.deadline = None if timeout is None else self._deadline(timeout)
        self._settings.owner.update(self)

    def _deadline(self, timeout: float) -> float:
        """When a wait of ``timeout`` s from now ends (see DEADLINE_SPREAD)."""
        return self._loop.time() + timeout * (1 + DEADLINE_SPREAD * random.random())

    def expire(self) -> None:
        """The deadline passed (the owner calls this)."""
        self.deadline = None
        if self.phase is Phase.BODY:
            self._timed_out = True  # the application answers 408
            self._wake()
            return
        log.debug("Closed a connection from %s: no progress in its %s", self.peer, self.phase.value)
        self.abort()

    def mark_authenticated(self) -> None:
        if not self.authenticated:
            self.authenticated = True
            self._settings.owner.update(self)

    # -- reading -----------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self.phase in (Phase.CLOSING, Phase.CLOSED) or self._transport is None:
            return
        self._h11.receive_data(data)
        if self.task is None:
            self._next_request()
            if self.phase is Phase.IDLE and self.task is None:  # a head begun
                self.waiting_since = None  # from now on it waits in another way
                self._enter(Phase.HEAD, self._settings.limits.request_timeout)
        elif self.phase is Phase.BODY:
            self._wake()
        else:
            # Not asked for: it stays in the kernel until the answer is out.
            self._transport.pause_reading()

    def _next_request(self) -> None:
        """Act on what the client sent while no request is in progress."""
        assert self._transport is not None
        while self.phase not in (Phase.CLOSING, Phase.CLOSED):
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError as err:
                if self.phase is Phase.LINGER:  # answered already
                    self.close()
                else:
                    self._refuse(400, f"Bad request: {err}")
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request) and self.phase is not Phase.LINGER:
                self._begin(event)
                return
            if isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                self.close()  # after lingering, or the client closed
                return
            # h11.Data while lingering: dropped

    def _begin(self, event: h11.Request) -> None:
        headers: dict[str, str] = {}
        for raw_name, raw_value in event.headers:
            name, value = raw_name.decode("ascii"), raw_value.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        request = Request(
            method=event.method.decode("ascii"),
            target=event.target.decode("ascii"),
            headers=headers,
            peer=self.peer,
            scheme="http" if self._settings.tls is None else "https",
            read_body=self._read_body,
            authenticated=self.mark_authenticated,
        )
        self._request = request
        self._timed_out = False
        self._enter(Phase.BUSY)
        self.task = self._loop.create_task(self._serve(request))

    async def _read_body(self) -> bytes:
        """The whole body of the request in progress (see Request.read_body)."""
        assert self._transport is not None and self._request is not None
        limit = self._settings.max_body
        try:
            length = int(self._request.headers.get("content-length", "0"))
        except ValueError:
            length = 0  # h11 refuses it as the body is read
        if length > limit:
            raise BodyError(413, f"Request body over {limit} bytes")
        if self._h11.they_are_waiting_for_100_continue:
            self._transport.write(
                self._out(
                    h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")
                )
            )
        self._enter(Phase.BODY, self._settings.limits.request_timeout)
        self._transport.resume_reading()
        chunks: list[bytes] = []
        size = 0
        try:
            while True:
                try:
                    event = self._h11.next_event()
                except h11.RemoteProtocolError as err:
                    raise BodyError(400, f"Malformed request body: {err}") from None
                if isinstance(event, h11.Data):
                    size += len(event.data)
                    if size > limit:
                        raise BodyError(413, f"Request body over {limit} bytes")
                    chunks.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    return b"".join(chunks)
                elif isinstance(event, h11.ConnectionClosed):
                    raise BodyError(400, "The connection closed before the whole body arrived")
                elif self._timed_out:
                    timeout = self._settings.limits.request_timeout
                    raise BodyError(408, f"The request body did not arrive within {timeout:g} s")
                else:  # NEED_DATA
                    await self._wait()
        finally:
            if self._reading_body():
                self._enter(Phase.BUSY)

    def _reading_body(self) -> bool:
        return self.phase is Phase.BODY

    # -- answering ---------------------------------------------------------------

    async def _serve(self, request: Request) -> None:
        try:
            response = await self._settings.app.handle(request)
        except Exception:  # a bug: logged, answered
            log.exception("Error while handling %s %s", request.method, request.target)
            response = self._settings.app.error(500, "Internal error")
        await self._send(request, response)

    async def _send(self, request: Request, response: Response) -> None:
        if self._transport is None:  # closed meanwhile
            return
        waiting_for_100 = self._h11.they_are_waiting_for_100_continue
        body_unread = not self._body_received()
        headers = [("Date", _http_date()), ("Content-Length", str(len(response.body)))]
        if response.content_type:
            headers.append(("Content-Type", response.content_type))
        headers += list(response.headers.items())
        if body_unread:
            headers.append(("Connection", "close"))
        phrase = HTTPStatus(response.status).phrase.encode("ascii")
        data = self._out(h11.Response(status_code=response.status, headers=headers, reason=phrase))
        if request.method != "HEAD" and response.body:
            data += self._out(h11.Data(data=response.body))
        self._transport.write(data + self._out(h11.EndOfMessage()))
        access_log.debug(
            '%s "%s %s" %d %d "%s"',
            self.peer,
            request.method,
            request.target,
            response.status,
            len(response.body),
            request.headers.get("user-agent", "-"),
        )
        if self._write_paused:
            self._enter(Phase.SENDING, self._settings.limits.request_timeout)
            while self._write_paused:
                await self._wait()
        self.task = None
        self._request = None
        self._after_answer(linger=body_unread and not waiting_for_100 and not self._timed_out)

    def _body_received(self) -> bool:
        """Whether the request's body is all in (what the application did not
        read of it is dropped); an empty one is at once."""
        while self._h11.their_state is h11.SEND_BODY:
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError:
                return False
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return False
        return True

    def _after_answer(self, linger: bool) -> None:
        assert self._transport is not None
        if self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
            self._h11.start_next_cycle()
            self.waiting_since = None  # a new wait begins
            limits = self._settings.limits
            if self._h11.trailing_data[0]:  # the next request's head began already
                self._enter(Phase.HEAD, limits.request_timeout)
            else:
                self._enter(Phase.IDLE, limits.idle_timeout)
        elif linger:
            self._enter(Phase.LINGER, self._settings.limits.request_timeout)
        else:
            self.close()
            return
        self._transport.resume_reading()
        self._next_request()  # what the client sent meanwhile

    def _refuse(self, status: int, message: str) -> None:
        """Answer a request that could not be read, and close."""
        assert self._transport is not None
        response = self._settings.app.error(status, message)
        head = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", f"Date: {_http_date()}"]
        if response.content_type:
            head.append(f"Content-Type: {response.content_type}")
        head += [f"Content-Length: {len(response.body)}", "Connection: close", "", ""]
        self._transport.write("\r\n".join(head).encode("latin-1") + response.body)
        self.close()

    def _out(self, event: h11.Event) -> bytes:
        return self._h11.send(event) or b""

    # -- flow control ------------------------------------------------------------

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake()

    async def _wait(self) -> None:
        """Until data arrives, the answer is sent, the deadline passes or the
        connection closes (CancelledError then)."""
        self._wakeup = self._loop.create_future()
        try:
            await self._wakeup
        finally:
            self._wakeup = None

    def _wake(self) -> None:
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)


_date_cache: tuple[int, str] = (0, "")


def _http_date() -> str:
    """The Date header's value, computed once a second."""
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, email.utils.formatdate(now, usegmt=True))
    return _date_cache[1]
