"""The stream's framing.

Exporter → importer: a header (the protocol tag, the magic, the compression,
whether the data is hashed, the size if known), frames (a 4-byte length and
that many bytes; the length is at most :data:`FRAME`), then an empty frame
and a trailer (the count of uncompressed bytes and their XXH3-128 digest).
Importer → exporter: one status byte once the header is accepted (a refusal
carries its reason), and after the trailer a reply with the importer's own
count and digest, sent only once the data is safe in the destination.
"""

from __future__ import annotations

import socket
import struct

from corral import errors

TAG = b"CORRAL-IMPEXP/1\n"
# Data moves in frames of at most this size, each into one buffer of this size.
FRAME = 4 * 1024 * 1024
COMPRESSIONS = ("none", "gzip", "gzip-fast", "gzip-slow", "zstd")
NO_SIZE = 2**64 - 1
FLAG_HASHED = 1
_HEAD = struct.Struct(">HBBQ")  # magic length, compression, flags, size
_LENGTH = struct.Struct(">I")
_TRAILER = struct.Struct(">Q16s")  # bytes, digest
_MESSAGE = struct.Struct(">H")
OK, REFUSED = b"\x01", b"\x00"
DIGEST_NONE = bytes(16)


class Header:
    """What the exporter announces before the data."""

    def __init__(self, magic: str, compress: str, hashed: bool, size: int | None) -> None:
        self.magic, self.compress, self.hashed, self.size = magic, compress, hashed, size

    def encode(self) -> bytes:
        magic = self.magic.encode("ascii")
        flags = FLAG_HASHED if self.hashed else 0
        size = NO_SIZE if self.size is None else self.size
        code = COMPRESSIONS.index(self.compress)
        return TAG + _HEAD.pack(len(magic), code, flags, size) + magic


class PeerClosed(errors.OpExecError):
    """The other end closed the connection before the stream's end."""


def recv_exact(sock: socket.socket, view: memoryview) -> None:
    """Fill ``view`` from ``sock``; OpExecError if the peer closes first."""
    got, total = 0, len(view)
    while got < total:
        n = sock.recv_into(view[got:], total - got)
        if n == 0:
            raise PeerClosed("the peer closed the connection")
        got += n


def recv_bytes(sock: socket.socket, size: int) -> bytes:
    """The next ``size`` bytes of ``sock``."""
    data = bytearray(size)
    recv_exact(sock, memoryview(data))
    return bytes(data)


def read_header(sock: socket.socket) -> Header:
    """The exporter's header; OpExecError for anything else."""
    tag = recv_bytes(sock, len(TAG))
    if tag != TAG:
        raise errors.OpExecError("the stream does not start with the import/export header")
    length, code, flags, size = _HEAD.unpack(recv_bytes(sock, _HEAD.size))
    if code >= len(COMPRESSIONS):
        raise errors.OpExecError(f"unknown compression code {code}")
    magic = recv_bytes(sock, length).decode("ascii", "replace")
    known = None if size == NO_SIZE else size
    return Header(magic, COMPRESSIONS[code], bool(flags & FLAG_HASHED), known)


def send_status(sock: socket.socket, message: str | None) -> None:
    """Accept (``message`` None) or refuse with the reason ``message``."""
    if message is None:
        sock.sendall(OK)
        return
    text = message.encode("utf-8", "replace")[:1000]
    sock.sendall(REFUSED + _MESSAGE.pack(len(text)) + text)


def read_status(sock: socket.socket) -> None:
    """The importer's verdict on the header: OpExecError with its reason if refused."""
    if recv_bytes(sock, 1) == OK:
        return
    (length,) = _MESSAGE.unpack(recv_bytes(sock, _MESSAGE.size))
    reason = recv_bytes(sock, length).decode("utf-8", "replace")
    raise errors.OpExecError(f"the importer refused the stream: {reason}")


def frame_header(length: int) -> bytes:
    """The length prefix of a frame (0: the end of the data)."""
    return _LENGTH.pack(length)


def read_frame_length(sock: socket.socket, scratch: memoryview) -> int:
    """The next frame's length (``scratch``: 4 reusable bytes); 0 at the end."""
    recv_exact(sock, scratch)
    (length,) = _LENGTH.unpack(scratch)
    if length > FRAME:
        raise errors.OpExecError(f"frame of {length} bytes, more than the {FRAME} allowed")
    return int(length)


def encode_trailer(count: int, digest: bytes) -> bytes:
    """The end of the data: its uncompressed byte count and digest."""
    return _TRAILER.pack(count, digest)


def read_trailer(sock: socket.socket) -> tuple[int, bytes]:
    """The exporter's count and digest."""
    count, digest = _TRAILER.unpack(recv_bytes(sock, _TRAILER.size))
    return int(count), bytes(digest)


def send_reply(sock: socket.socket, count: int, digest: bytes, error: str | None) -> None:
    """The importer's final word: its count and digest, or why it failed."""
    if error is None:
        sock.sendall(OK + encode_trailer(count, digest))
    else:
        send_status(sock, error)


def read_reply(sock: socket.socket) -> tuple[int, bytes]:
    """The importer's count and digest; OpExecError with its reason if it failed."""
    if recv_bytes(sock, 1) != OK:
        (length,) = _MESSAGE.unpack(recv_bytes(sock, _MESSAGE.size))
        reason = recv_bytes(sock, length).decode("utf-8", "replace")
        raise errors.OpExecError(f"the importer failed: {reason}")
    return read_trailer(sock)
