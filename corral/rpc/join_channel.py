"""The connection of a join exchange (:mod:`corral.node.join_protocol`).

A node waiting to join has no cluster certificate yet: the master talks to it
on a connection of its own, whose peer certificate (self-signed, not
verified) the node's proof is bound to.  :class:`JoinChannel` is what the
master's join session (:mod:`corral.services.join_client`) needs from
a transport; :class:`TlsJoinChannel` is the production one (HTTP/1.1 over
TLS); :class:`corral.node.local.LocalJoinChannel` the in-process one.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import Protocol

from corral.paths import Paths

# The node's answers are a few kilobytes (a certificate request, capabilities).
MAX_ANSWER = 1024 * 1024


class JoinChannel(Protocol):
    """One connection to a node waiting to join.

    ``connect`` raises ssl.SSLError when the node refuses the handshake,
    OSError or TimeoutError when it cannot be reached; ``post`` raises
    OSError, ssl.SSLError or asyncio.IncompleteReadError when the exchange
    breaks off.
    """

    where: str  # "address:port", for messages
    peer_cert: bytes | None  # the node's certificate (DER), once connected

    async def connect(self) -> None:
        """Open the connection and record the node's certificate."""
        ...

    async def post(self, path: str, body: bytes) -> bytes:
        """The body of the node's answer to ``POST path``."""
        ...

    async def close(self) -> None:
        """Close the connection."""
        ...


def _client_context(paths: Paths) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = False
    # The node's certificate is self-signed; the token's proof authenticates it.
    ctx.verify_mode = ssl.CERT_NONE
    # A node of this cluster asks for a client certificate: it then answers that
    # it is in a cluster already, rather than failing the handshake.
    ctx.load_cert_chain(paths.client_pem)
    return ctx


class TlsJoinChannel:
    """The join exchange's requests on one TLS connection to ``address:port``."""

    def __init__(self, paths: Paths, address: str, port: int) -> None:
        self._address, self._port = address, port
        self.where = f"{address}:{port}"
        self._ctx = _client_context(paths)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self.peer_cert: bytes | None = None

    async def connect(self) -> None:
        """Connect; ``peer_cert`` stays None if the node sent no certificate."""
        reader, writer = await asyncio.open_connection(self._address, self._port, ssl=self._ctx)
        self._reader, self._writer = reader, writer
        ssl_object = writer.get_extra_info("ssl_object")
        self.peer_cert = ssl_object.getpeercert(binary_form=True) if ssl_object else None

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await self._writer.wait_closed()
            self._writer = None

    async def post(self, path: str, body: bytes) -> bytes:
        """HTTP/1.1 on the connection."""
        assert self._reader is not None and self._writer is not None
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.where}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self._writer.write(head.encode("ascii") + body)
        return await self._read_answer()

    async def _read_answer(self) -> bytes:
        assert self._reader is not None
        head = await self._reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        if not 0 <= length <= MAX_ANSWER:
            raise OSError(f"answer of {length} bytes")
        return await self._reader.readexactly(length)
