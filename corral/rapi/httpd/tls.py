"""TLS for corral-rapi's connections, with small buffers.

asyncio's own TLS (``loop.connect_accepted_socket(..., ssl=...)``) gives every
connection a 256 KiB receive buffer, zero-filled at once, and lets 256 KiB of
unread data pile up in front of a paused reader: 1,000 idle clients cost
256 MiB.  Here the same protocol (asyncio.sslproto's, the one asyncio uses)
gets a 4 KiB buffer (a request body of 1 MiB is 256 reads) and a smaller read
limit, is attached as a plain protocol to the accepted socket, and tells its
owner when the socket is gone, whether or not the handshake ever finished.
"""

from __future__ import annotations

import asyncio
import ssl
from asyncio import sslproto
from typing import Protocol

# Bytes read from the socket at a time.
BUFFER_SIZE = 4 * 1024
# Encrypted data received but not yet read beyond which the socket is not
# read any more (asyncio's default: 256 KiB).
READ_HIGH_WATER = 64 * 1024


class SocketOwner(Protocol):
    """Who is told about the socket under the TLS layer."""

    def socket_made(self, transport: asyncio.BaseTransport) -> None:
        """The socket's transport exists (the handshake begins)."""

    def socket_lost(self) -> None:
        """The socket is closed, whatever state TLS was in."""


class ServerTls(sslproto.SSLProtocol):
    """The server side of TLS over an accepted socket, for ``app``."""

    max_size = BUFFER_SIZE

    def __init__(
        self,
        app: asyncio.Protocol,
        owner: SocketOwner,
        context: ssl.SSLContext,
        handshake_timeout: float,
        shutdown_timeout: float,
    ) -> None:
        """TLS for ``app``; ``shutdown_timeout``: seconds a close may take
        (sending what is left, close_notify both ways)."""
        super().__init__(
            asyncio.get_running_loop(),
            app,
            context,
            # No waiter: the owner learns of the handshake from the app's
            # connection_made (a waiter's unread failure would be logged).
            None,  # type: ignore[arg-type]
            server_side=True,
            ssl_handshake_timeout=handshake_timeout,  # type: ignore[arg-type]
            ssl_shutdown_timeout=shutdown_timeout,
        )
        self._set_read_buffer_limits(READ_HIGH_WATER)  # type: ignore[attr-defined]
        self._owner: SocketOwner | None = owner

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self._owner is not None:
            self._owner.socket_made(transport)
        super().connection_made(transport)

    def connection_lost(self, exc: BaseException | None) -> None:
        super().connection_lost(exc)
        owner, self._owner = self._owner, None
        if owner is not None:
            owner.socket_lost()
