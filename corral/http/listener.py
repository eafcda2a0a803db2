"""noded's listening socket: TLS handshakes with a deadline, connections bounded.

asyncio's own server keeps a connection that never finishes its TLS handshake
for a minute and accepts as many as the limit of open files allows; and when
that limit is reached it logs every failed accept (``backlog`` times per
attempt) with a traceback.  So a client without any certificate could make the
node unreachable and fill its disk with log.  Here:

- every accepted socket must finish its handshake within ``handshake_timeout``;
- at most ``max_unauthenticated`` wait for theirs at once, and at most
  ``max_connections`` are open in all: a new connection beyond either bound
  closes the oldest unauthenticated one (so the master's fresh connection gets
  through a flood), or is refused when all are authenticated;
- when accept fails for want of descriptors (other files took the reserve),
  the oldest unauthenticated connection goes to make room; with none to drop,
  accepting pauses briefly instead of spinning.

Established connections are aiohttp's, as with its own sites.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl

from aiohttp import web

from corral.http.accepting import (
    ACCEPT_RETRY_DELAY,
    BACKLOG,
    OUT_OF_RESOURCES,
    error_reason,
)
from corral.http.limits import ConnectionLimits

log = logging.getLogger(__name__)


class GuardedTCPSite(web.BaseSite):
    """An HTTPS site of ``runner`` on ``host:port`` that enforces ``limits``."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext,
        limits: ConnectionLimits,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context, backlog=BACKLOG)
        self._host = host
        self._port = port
        self._tls = ssl_context
        self._limits = limits
        self._sock: socket.socket | None = None
        self._acceptor: asyncio.Task[None] | None = None
        # Handshakes in progress, oldest first (dicts keep insertion order).
        self._waiting: dict[asyncio.Task[bool], str] = {}

    @property
    def name(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"https://{host}:{self._port}"

    def set_ssl_context(self, ssl_context: ssl.SSLContext) -> None:
        """Use ``ssl_context`` for the connections accepted from now on."""
        self._tls = ssl_context

    async def start(self) -> None:
        """Listen (OSError if the address cannot be bound) and start accepting."""
        await super().start()
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        self._sock = socket.create_server(
            (self._host, self._port), family=family, backlog=self._backlog
        )
        self._sock.setblocking(False)
        self._acceptor = asyncio.create_task(self._accept_loop(self._sock))

    async def stop(self) -> None:
        """Stop accepting and drop the unauthenticated connections."""
        tasks = [task for task in (self._acceptor, *self._waiting) if task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        if self._sock is not None:
            self._sock.close()
        await super().stop()

    async def _accept_loop(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, peer = await loop.sock_accept(sock)
            except ConnectionAbortedError:
                continue
            except OSError as err:
                log.error("Cannot accept a connection on %s: %s", self.name, error_reason(err))
                dropped = self._drop_oldest() if err.errno in OUT_OF_RESOURCES else None
                if dropped is None:
                    # Not spinning: the error would come back at once.
                    await asyncio.sleep(ACCEPT_RETRY_DELAY)
                else:
                    # Its socket is closed by then (or in the next step): retry.
                    await asyncio.wait([dropped])
                    await asyncio.sleep(0)
                continue
            self._admit(conn, str(peer[0]))
            # sock_accept does not yield while connections are queued: let the
            # handshakes (and the closing of dropped ones) run meanwhile.
            await asyncio.sleep(0)

    def _established(self) -> int:
        server = self._runner.server
        return len(server.connections) if server is not None else 0

    def _admit(self, conn: socket.socket, peer: str) -> None:
        limits = self._limits
        full = len(self._waiting) >= limits.max_unauthenticated or (
            len(self._waiting) + self._established() >= limits.max_connections
        )
        if full and self._drop_oldest() is None:
            log.warning(
                "Refused a connection from %s: %d connections are open (limit %d)",
                peer,
                self._established(),
                limits.max_connections,
            )
            conn.close()
            return
        task = asyncio.create_task(self._handshake(conn, peer))
        self._waiting[task] = peer
        task.add_done_callback(lambda done: self._finished(done, conn))

    def _finished(self, task: asyncio.Task[bool], conn: socket.socket) -> None:
        self._waiting.pop(task, None)
        handed_over = False
        if not task.cancelled():
            err = task.exception()
            if err is not None:
                log.error("TLS handshake failed unexpectedly", exc_info=err)
            handed_over = err is None and task.result()
        # Unless aiohttp took the connection over, close the socket: the transport,
        # if one was made, has stopped watching it, and a task cancelled before it
        # ever ran made none.
        if not handed_over:
            conn.close()

    def _drop_oldest(self) -> asyncio.Task[bool] | None:
        """Close the oldest connection still in its handshake; its task, if there was one."""
        if not self._waiting:
            return None
        task, peer = next(iter(self._waiting.items()))
        del self._waiting[task]
        log.info(
            "Closed an unauthenticated connection from %s: %d are waiting"
            " for their TLS handshake (limit %d)",
            peer,
            len(self._waiting) + 1,
            self._limits.max_unauthenticated,
        )
        task.cancel()
        return task

    async def _handshake(self, conn: socket.socket, peer: str) -> bool:
        """Hand ``conn`` to aiohttp once its TLS handshake is done; whether it was."""
        server = self._runner.server
        assert server is not None
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                server,
                conn,
                ssl=self._tls,
                ssl_handshake_timeout=self._limits.handshake_timeout,
            )
        except (OSError, EOFError) as err:
            log.info("TLS handshake with %s failed: %s", peer, error_reason(err))
            return False
        return True
