"""The client side of noded's console relay (:mod:`corral.node.console_relay`).

A WebSocket (RFC 6455, binary messages) over mutual TLS with the cluster's
client certificate, made with the standard library alone: the gnt-* commands
import no heavy library.  The terminal is attached as ssh and socat attach it
for Ganeti: raw when it is a tty, Ctrl-] (0x1d, socat's ``escape=0x1d``)
detaches.  Input from a pipe is relayed as typed; its end detaches too.
"""

from __future__ import annotations

import base64
import hashlib
import os
import select
import socket
import ssl
import struct
from urllib.parse import quote

from corral.cli import noded_client

ESCAPE = 0x1D  # Ctrl-]
CONNECT_TIMEOUT = noded_client.CONNECT_TIMEOUT
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455's accept suffix
_OP_CONTINUATION, _OP_TEXT, _OP_BINARY, _OP_CLOSE, _OP_PING = 0, 1, 2, 8, 9
_OP_PONG = 10
_DATA_OPS = (_OP_CONTINUATION, _OP_TEXT, _OP_BINARY)
_CLOSE_NORMAL = struct.pack(">H", 1000)
_MAX_HEAD = 64 * 1024
_READ = 64 * 1024


class RelayError(Exception):
    """The relay could not be reached or refused the console."""


def _tls_context(root: str) -> ssl.SSLContext:
    try:
        return noded_client.tls_context(root)
    except noded_client.NodeCallError as err:
        raise RelayError(str(err)) from None


def _read_head(sock: ssl.SSLSocket) -> tuple[bytes, bytes]:
    """The HTTP answer's head, and what came after it."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(_READ)
        if not chunk:
            raise RelayError("The node closed the connection before answering")
        data += chunk
        if len(data) > _MAX_HEAD:
            raise RelayError("The node's answer is too long")
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _headers(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        raise RelayError(f"Invalid answer from the node: {lines[0]!r}")
    fields = (line.partition(":") for line in lines[1:])
    return int(parts[1]), {k.strip().lower(): v.strip() for k, _, v in fields}


def connect(root: str, address: str, port: int, instance: str) -> tuple[ssl.SSLSocket, bytes]:
    """The relay's WebSocket to ``instance``'s console on the node at
    ``address:port``, and the bytes already read past the handshake."""
    try:
        raw = socket.create_connection((address, port), timeout=CONNECT_TIMEOUT)
        sock = _tls_context(root).wrap_socket(raw)
    except OSError as err:
        raise RelayError(f"Cannot connect to {address}:{port}: {err}") from None
    key = base64.b64encode(os.urandom(16))
    host = f"[{address}]" if ":" in address else address
    request = (
        f"GET /console/{quote(instance, safe='')} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key.decode()}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    try:
        sock.sendall(request.encode())
        head, rest = _read_head(sock)
    except OSError as err:
        sock.close()
        raise RelayError(f"Error talking to {address}:{port}: {err}") from None
    status, headers = _headers(head)
    if status != 101:
        sock.close()
        text = rest.decode(errors="replace").strip() or head.split(b"\r\n")[0].decode()
        raise RelayError(f"The node refused the console ({status}): {text}")
    accept = base64.b64encode(hashlib.sha1(key + _GUID).digest()).decode()
    if headers.get("sec-websocket-accept") != accept:
        sock.close()
        raise RelayError("The node's WebSocket handshake is invalid")
    sock.settimeout(None)
    return sock, rest


def _mask(data: bytes, key: bytes) -> bytes:
    if not data:
        return b""
    size = len(data)
    stream = (key * (size // 4 + 1))[:size]
    return (int.from_bytes(data, "big") ^ int.from_bytes(stream, "big")).to_bytes(size, "big")


def frame(opcode: int, payload: bytes) -> bytes:
    """One masked client frame (RFC 6455 section 5.2)."""
    size = len(payload)
    if size < 126:
        head = struct.pack(">BB", 0x80 | opcode, 0x80 | size)
    elif size < 1 << 16:
        head = struct.pack(">BBH", 0x80 | opcode, 0x80 | 126, size)
    else:
        head = struct.pack(">BBQ", 0x80 | opcode, 0x80 | 127, size)
    key = os.urandom(4)
    return head + key + _mask(payload, key)


class Frames:
    """Frames parsed from the bytes the node sends."""

    def __init__(self, data: bytes = b"") -> None:
        self.buffer = bytearray(data)

    def feed(self, data: bytes) -> None:
        self.buffer += data

    def next(self) -> tuple[int, bytes] | None:
        """The next whole frame's opcode and payload, or None until more arrives."""
        buf = self.buffer
        if len(buf) < 2:
            return None
        size, pos = buf[1] & 0x7F, 2
        if size >= 126:
            width = 2 if size == 126 else 8
            if len(buf) < 2 + width:
                return None
            size, pos = int.from_bytes(buf[2 : 2 + width], "big"), 2 + width
        key = b""
        if buf[1] & 0x80:
            key, pos = bytes(buf[pos : pos + 4]), pos + 4
        if len(buf) < pos + size:
            return None
        payload = bytes(buf[pos : pos + size])
        opcode = buf[0] & 0x0F
        del buf[: pos + size]
        return opcode, _mask(payload, key) if key else payload


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _from_node(sock: ssl.SSLSocket, frames: Frames, out_fd: int) -> bool:
    """Handle the whole frames received; False when the node ends the session."""
    while (item := frames.next()) is not None:
        opcode, payload = item
        if opcode in _DATA_OPS:
            _write_all(out_fd, payload)
        elif opcode == _OP_PING:
            sock.sendall(frame(_OP_PONG, payload))
        elif opcode == _OP_CLOSE:
            code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1000
            if code != 1000:  # not the console's end: the node went away
                reason = payload[2:].decode(errors="replace") or f"code {code}"
                raise RelayError(f"The node ended the console: {reason}")
            return False
    return True


def _session(sock: ssl.SSLSocket, frames: Frames, in_fd: int, out_fd: int) -> None:
    """Relay until the node closes, Ctrl-] is typed or the input ends."""
    while _from_node(sock, frames, out_fd):
        # Bytes TLS already decrypted are not seen by select.
        fd = sock.fileno()
        ready = [fd] if sock.pending() else select.select([fd, in_fd], [], [])[0]
        if fd in ready:
            data = sock.recv(_READ)
            if not data:
                raise RelayError("The node closed the connection")
            frames.feed(data)
        if in_fd in ready:
            typed = os.read(in_fd, _READ)
            before, escape, _ = typed.partition(bytes([ESCAPE]))
            if before:
                sock.sendall(frame(_OP_BINARY, before))
            if escape or not typed:
                sock.sendall(frame(_OP_CLOSE, _CLOSE_NORMAL))
                return


def attach(sock: ssl.SSLSocket, pending: bytes, in_fd: int = 0, out_fd: int = 1) -> None:
    """Attach ``in_fd``/``out_fd`` (the terminal: raw while attached) to the console."""
    saved = None
    if os.isatty(in_fd):
        import termios
        import tty

        saved = termios.tcgetattr(in_fd)
        tty.setraw(in_fd)
    try:
        _session(sock, Frames(pending), in_fd, out_fd)
    except OSError as err:
        raise RelayError(f"The console connection failed: {err}") from None
    finally:
        if saved is not None:
            termios.tcsetattr(in_fd, termios.TCSADRAIN, saved)
        sock.close()
