"""A VNC client for tests: RFB 3.8's handshake up to the server's
ServerInit, with the security types QEMU offers: None, VNC authentication,
and VeNCrypt's X.509 ones (TLS first, then None or VNC authentication)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
from cryptography.hazmat.primitives.ciphers import Cipher, modes

VERSION = b"RFB 003.008\n"
NONE, VNC_AUTH, VENCRYPT = 1, 2, 19
X509_NONE, X509_VNC = 260, 261


@dataclass
class Session:
    """What the server said: the security types it offered, the result of
    the security handshake (0: accepted) and, once accepted, the ServerInit's
    framebuffer size and desktop name."""

    types: list[int]
    result: int
    size: tuple[int, int] | None = None
    name: str | None = None


def vnc_response(password: str, challenge: bytes) -> bytes:
    """RFB's VNC authentication: DES of the challenge, keyed by the password
    with each byte's bits reversed."""
    key = bytes(int(f"{b:08b}"[::-1], 2) for b in password.encode()[:8].ljust(8, b"\0"))
    # Three times the same key: single DES.
    encryptor = Cipher(TripleDES(key * 3), modes.ECB()).encryptor()
    return encryptor.update(challenge) + encryptor.finalize()


@contextlib.asynccontextmanager
async def vnc_session(
    host: str, port: int, password: str | None = None, ca: Path | None = None
) -> AsyncIterator[Session]:
    """Connect, log in (VeNCrypt over X.509 checked against ``ca`` when
    given, VNC authentication with ``password`` when given) and read the
    ServerInit; the connection stays open for the block."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        assert await reader.readexactly(12) == VERSION
        writer.write(VERSION)
        count = (await reader.readexactly(1))[0]
        assert count, await reader.read(200)  # 0: the server's reason follows
        types = list(await reader.readexactly(count))
        chosen = VENCRYPT if ca is not None else VNC_AUTH if password is not None else NONE
        writer.write(bytes([chosen]))
        if ca is not None:
            await _vencrypt(reader, writer, host, ca, password is not None)
        if password is not None:
            writer.write(vnc_response(password, await reader.readexactly(16)))
        session = Session(types, int.from_bytes(await reader.readexactly(4), "big"))
        if session.result == 0:
            writer.write(b"\x01")  # ClientInit: share the desktop with other clients
            await _server_init(reader, session)
        yield session
    finally:
        writer.close()


async def _vencrypt(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    host: str,
    ca: Path,
    password: bool,
) -> None:
    """VeNCrypt 0.2: agree on the X.509 subtype, then TLS (the server's
    certificate checked against ``ca`` and ``host``)."""
    assert await reader.readexactly(2) == b"\x00\x02"
    writer.write(b"\x00\x02")
    assert await reader.readexactly(1) == b"\x00"  # version accepted
    count = (await reader.readexactly(1))[0]
    subtypes = [int.from_bytes(await reader.readexactly(4), "big") for _ in range(count)]
    wanted = X509_VNC if password else X509_NONE
    assert wanted in subtypes, subtypes
    writer.write(wanted.to_bytes(4, "big"))
    assert await reader.readexactly(1) == b"\x01"  # subtype accepted
    await writer.start_tls(ssl.create_default_context(cafile=str(ca)), server_hostname=host)


async def _server_init(reader: asyncio.StreamReader, session: Session) -> None:
    head = await reader.readexactly(24)  # size, pixel format (16), name length
    session.size = (int.from_bytes(head[0:2], "big"), int.from_bytes(head[2:4], "big"))
    length = int.from_bytes(head[20:24], "big")
    session.name = (await reader.readexactly(length)).decode()
