"""corral-rapi's listening socket: connections admitted within bounds, the
oldest waiting one closed for a newcomer, bursts held in the kernel's backlog.

- At most ``max_connections`` connections are open, at most
  ``max_unauthenticated`` of them without valid credentials so far.
- A newcomer beyond a bound closes the connection that has waited on its
  client the longest (see corral.rapi.limits), if it has waited
  ``EVICTABLE_AFTER`` at least: an unauthenticated one first, and of those one
  whose client does nothing (sent nothing yet, idle between requests) before
  one whose client is sending or reading, however slowly.  Otherwise (a burst of young
  connections, or every connection busy) accepting pauses: the newcomer waits,
  accepted but not yet served, and the next ones in the kernel's backlog, none
  reset, until a connection ends or grows old.
- When accept fails for want of descriptors, the oldest waiting connection
  goes whatever its age; with none, accepting pauses briefly.
- Deadlines are looked at every ``SWEEP`` seconds, for all connections at
  once: one timer, none per request.
- Stopping closes everything within ``STOP_GRACE`` seconds: requests in
  progress get that long to finish, waiting clients none.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections import OrderedDict

from corral.http.accepting import ACCEPT_RETRY_DELAY, BACKLOG, OUT_OF_RESOURCES, error_reason
from corral.rapi.httpd.connection import ConnectionSettings, HttpConnection, Phase
from corral.rapi.httpd.messages import Application
from corral.rapi.limits import EVICTABLE_AFTER, STOP_GRACE, RapiLimits

log = logging.getLogger(__name__)

# Linux's IP_FREEBIND (not in Python 3.11's socket module).
_IP_FREEBIND = getattr(socket, "IP_FREEBIND", 15)

# Connections accepted per readiness of the socket, before others get a turn.
ACCEPT_BATCH = 64
# Seconds between looks at the connections while accepting pauses with none
# that could be closed (a connection ending resumes it at once).
PAUSE_CHECK = 0.25
# Seconds between looks at the connections' deadlines (how late one may act).
SWEEP = 0.25

_Waiting = OrderedDict[HttpConnection, None]
# Classes of waiting connections, (authenticated, active), in the order in
# which they are closed for newcomers.
_CLASSES = ((False, False), (False, True), (True, False), (True, True))


def _freebind_server(family: int, host: str, port: int) -> socket.socket:
    """A listening socket on an address this machine may not have yet (Linux's
    IP_FREEBIND): the master IP, which comes and goes with the mastership."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_IP, _IP_FREEBIND, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


class Listener:
    """Serves ``app`` on ``host:port``, over TLS if ``tls`` is given."""

    def __init__(
        self,
        app: Application,
        host: str,
        port: int,
        *,
        tls: ssl.SSLContext | None,
        limits: RapiLimits,
        max_body: int,
        freebind: bool = False,
    ) -> None:
        self._host = host
        self._freebind = freebind
        self._port = port
        self._limits = limits
        self._settings = ConnectionSettings(app, self, limits, max_body, tls)
        self._loop = asyncio.get_running_loop()
        self._sock: socket.socket | None = None
        self._reading = False
        self._stopping = False
        self._resume_timer: asyncio.TimerHandle | None = None
        self._sweeper: asyncio.TimerHandle | None = None
        # A connection accepted while there was no room, and its peer.
        self._parked: tuple[socket.socket, str] | None = None
        self._authenticated: set[HttpConnection] = set()
        self._unauthenticated: set[HttpConnection] = set()
        # Connections waiting on their client, by class, the longest waiting first.
        self._waiting: dict[tuple[bool, bool], _Waiting] = {c: OrderedDict() for c in _CLASSES}

    @property
    def name(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        scheme = "http" if self._settings.tls is None else "https"
        return f"{scheme}://{host}:{self._port}"

    def __len__(self) -> int:
        """How many connections are open."""
        return len(self._authenticated) + len(self._unauthenticated)

    async def start(self) -> None:
        """Listen (OSError if the address cannot be bound) and start accepting."""
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        if self._freebind:
            self._sock = _freebind_server(family, self._host, self._port)
        else:
            self._sock = socket.create_server(
                (self._host, self._port), family=family, backlog=BACKLOG
            )
        self._sock.setblocking(False)
        self._resume()
        self._sweeper = self._loop.call_later(SWEEP, self._sweep)

    async def stop(self) -> None:
        """Stop accepting and close every connection (see the module's doc)."""
        self._stopping = True
        self._pause(None)
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._sock is not None:
            self._sock.close()
        if self._parked is not None:
            self._parked[0].close()
            self._parked = None
        connections = [*self._authenticated, *self._unauthenticated]
        busy = [conn.task for conn in connections if conn.task is not None]
        if busy:
            await asyncio.wait(busy, timeout=STOP_GRACE)
        for conn in [*self._authenticated, *self._unauthenticated]:
            conn.abort()
        # Let the cancelled requests end.
        await asyncio.sleep(0)

    # -- accepting ---------------------------------------------------------------

    def _readable(self) -> None:
        if self._stopping or self._sock is None:
            return
        for _ in range(ACCEPT_BATCH):
            if self._parked is None:
                try:
                    sock, address = self._sock.accept()
                except (BlockingIOError, InterruptedError):
                    return
                except ConnectionAbortedError:
                    continue
                except OSError as err:
                    if not self._out_of_resources(err):
                        return
                    continue
                sock.setblocking(False)
                # asyncio sets this only for sockets made as IPPROTO_TCP, and
                # an accepted one says 0: without it, an answer after the TLS
                # session tickets waits 40 ms for the client's delayed ACK.
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._parked = (sock, str(address[0]))
            if not self._room():
                # The newcomer waits, accepted but not served; the next ones
                # in the kernel's backlog.
                self._pause(self._next_look())
                return
            sock, peer = self._parked
            self._parked = None
            conn = HttpConnection(self._settings, peer)
            self._unauthenticated.add(conn)
            self.update(conn)
            conn.start(sock)

    def _out_of_resources(self, err: OSError) -> bool:
        """After a failed accept: whether to go on (a connection was closed to
        make room) or not (accepting pauses briefly)."""
        log.error("Cannot accept a connection on %s: %s", self.name, error_reason(err))
        oldest = self._oldest(0.0) if err.errno in OUT_OF_RESOURCES else None
        if oldest is None:
            self._pause(ACCEPT_RETRY_DELAY)  # not spinning: the error would come back
            return False
        self._evict(oldest, "no descriptor is left")
        return True

    def _room(self) -> bool:
        """Whether a newcomer may be accepted, after closing an old connection
        if a bound is reached and one has waited long enough."""
        limits = self._limits
        total_full = len(self) >= limits.max_connections
        if not total_full and len(self._unauthenticated) < limits.max_unauthenticated:
            return True
        victim = self._oldest(EVICTABLE_AFTER, authenticated_too=total_full)
        if victim is None:
            return False
        self._evict(victim, f"{len(self)} connections are open")
        return True

    def _oldest(self, min_wait: float, authenticated_too: bool = True) -> HttpConnection | None:
        """The connection to close for a newcomer (see the module's doc): the
        first class's that has waited on its client the longest, if for
        ``min_wait`` s at least."""
        now = self._loop.time()
        for authenticated, active in _CLASSES:
            if authenticated and not authenticated_too:
                break
            waiting = self._waiting[authenticated, active]
            if waiting:
                conn = next(iter(waiting))
                since = conn.waiting_since
                if conn.phase is Phase.CLOSING or (since is not None and now - since >= min_wait):
                    return conn
        return None

    def _evict(self, conn: HttpConnection, why: str) -> None:
        since = conn.waiting_since
        waited = self._loop.time() - since if since is not None else 0.0
        log.info(
            "Closed a connection from %s that waited %.1f s for its client (%s): %s",
            conn.peer,
            waited,
            conn.phase.value,
            why,
        )
        conn.abort()

    def _next_look(self) -> float:
        """Seconds until a waiting connection may be closed for a newcomer."""
        oldest = [next(iter(w)) for w in self._waiting.values() if w]
        starts = [c.waiting_since for c in oldest if c.waiting_since is not None]
        if not starts:
            return PAUSE_CHECK
        return max(min(starts) + EVICTABLE_AFTER - self._loop.time(), 0.01)

    def _pause(self, delay: float | None) -> None:
        """Stop accepting, for ``delay`` seconds at most (None: until resumed)."""
        if self._reading and self._sock is not None:
            self._loop.remove_reader(self._sock.fileno())
            self._reading = False
        if self._resume_timer is not None:
            self._resume_timer.cancel()
            self._resume_timer = None
        if delay is not None:
            self._resume_timer = self._loop.call_later(delay, self._resume)

    def _resume(self) -> None:
        if self._reading or self._stopping or self._sock is None:
            return
        if self._resume_timer is not None:
            self._resume_timer.cancel()
            self._resume_timer = None
        self._loop.add_reader(self._sock.fileno(), self._readable)
        self._reading = True
        if self._parked is not None:  # waiting for room, whatever the backlog holds
            self._loop.call_soon(self._readable)

    # -- the connections' states ------------------------------------------------

    def _sweep(self) -> None:
        """Act on the deadlines that passed."""
        now = self._loop.time()
        for conn in [*self._unauthenticated, *self._authenticated]:
            if conn.deadline is not None and conn.deadline <= now:
                conn.expire()
        self._sweeper = self._loop.call_later(SWEEP, self._sweep)

    def update(self, conn: HttpConnection) -> None:
        """Keep count of ``conn``'s class and wait (see connection.Owner)."""
        closed = conn.phase is Phase.CLOSED
        if closed:
            self._authenticated.discard(conn)
            self._unauthenticated.discard(conn)
            self._resume()
        elif conn.authenticated and conn in self._unauthenticated:
            self._unauthenticated.remove(conn)
            self._authenticated.add(conn)
            self._resume()
        waiting = not closed and conn.waiting_since is not None
        cls = (conn.authenticated, conn.active) if waiting else None
        if cls != conn.listed:
            if conn.listed is not None:
                self._waiting[conn.listed].pop(conn, None)
            if cls is not None:
                self._waiting[cls][conn] = None
            conn.listed = cls
        if cls is not None and conn.phase is Phase.CLOSING:
            self._waiting[cls].move_to_end(conn, last=False)  # the first to go
