"""The sending end: connect, announce, stream the source, get the importer's word."""

from __future__ import annotations

import mmap
import queue
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from corral import errors
from corral.node.impexp import channel, wire
from corral.node.impexp.codec import Encoder, encoder
from corral.node.impexp.engine import (
    END,
    GATE,
    ImpExp,
    get,
    helper,
    new_hash,
    queues,
    text,
)
from corral.node.impexp.sources import Source


@dataclass
class ExportPlan:
    """Where to send what, and how."""

    host: str
    port: int
    context: ssl.SSLContext
    connect_timeout: float
    magic: str
    compress: str
    # Opens the source (in the stream's thread; a script starts here).
    open_source: Callable[[ImpExp], Source]
    hashed: bool = True


def _read_all(
    stream: ImpExp,
    source: Source,
    rings: tuple[queue.SimpleQueue[Any], ...],
    digest: Any,
    enc: Encoder | None,
) -> None:
    """The reader thread: each piece of the source, hashed and (compressed
    here, so that compressing and encrypting run at once) queued for sending.
    Queued: (the buffer, the piece, its compressed bytes or None)."""
    free, full = rings
    while True:
        buffer: mmap.mmap = get(stream, free)
        view = source.read(buffer)
        if not view:
            break
        if digest is not None:
            digest.update(view)
        full.put((buffer, view, None if enc is None else enc.compress(view)))
    source.finish()
    if enc is not None:
        full.put((None, memoryview(b""), enc.flush()))
    full.put(END)


def _send_compressed(sock: ssl.SSLSocket, data: bytes) -> None:
    for start in range(0, len(data), wire.FRAME):
        piece = data[start : start + wire.FRAME]
        sock.sendall(wire.frame_header(len(piece)))
        sock.sendall(piece)


def _send_all(
    stream: ImpExp, sock: ssl.SSLSocket, rings: tuple[queue.SimpleQueue[Any], ...]
) -> None:
    """The sending thread: the queued pieces, framed, until the end."""
    free, full = rings
    while (item := get(stream, full)) is not END:
        buffer, view, packed = item
        size = len(view)
        with view:
            if packed is not None:
                _send_compressed(sock, packed)
            elif size:
                sock.sendall(wire.frame_header(size))
                sock.sendall(view)
        if buffer is not None:
            free.put(buffer)
        stream.moved += size
        GATE.passage(stream)
        stream.check()


def _refused(err: ssl.SSLError) -> errors.OpExecError:
    return errors.OpExecError(f"the importer refused the TLS connection: {err.reason or err}")


def export(plan: ExportPlan, stream: ImpExp) -> None:
    """The stream's body (in its thread): until the importer confirmed every byte."""
    deadline = time.monotonic() + plan.connect_timeout
    sock = channel.connect(
        plan.host, plan.port, plan.context, deadline, stream.stopped, stream.note
    )
    stream.sock = sock
    try:
        stream.check()
        source = plan.open_source(stream)
        stream.endpoint = source
        try:
            _stream(plan, stream, sock, source)
        finally:
            source.close()
    finally:
        sock.close()


def _stream(plan: ExportPlan, stream: ImpExp, sock: ssl.SSLSocket, source: Source) -> None:
    if stream.size is None and source.size is not None:
        stream.size = source.size
    header = wire.Header(plan.magic, plan.compress, plan.hashed, stream.size)
    try:
        sock.sendall(header.encode())
        wire.read_status(sock)
    except ssl.SSLError as err:
        raise _refused(err) from None
    sock.settimeout(None)
    stream.set_connected(f"connected to {plan.host}:{plan.port}")
    rings = queues(stream)
    digest = new_hash(plan.hashed)
    enc = encoder(plan.compress)
    reader = helper(stream, "read", lambda: _read_all(stream, source, rings, digest, enc))
    try:
        _send_all(stream, sock, rings)
    except BaseException as err:
        stream.fail(text(err))  # wakes the reader before it is waited for
        raise
    finally:
        reader.join()
    stream.check()
    mine = digest.digest() if digest is not None else wire.DIGEST_NONE
    sock.sendall(wire.frame_header(0) + wire.encode_trailer(stream.moved, mine))
    count, theirs = wire.read_reply(sock)
    if count != stream.moved or theirs != mine:
        raise errors.OpExecError(
            f"the importer wrote {count} bytes with digest {theirs.hex()}, not the"
            f" {stream.moved} bytes with digest {mine.hex()} sent"
        )
    stream.note(f"finished sending {stream.moved} bytes")
