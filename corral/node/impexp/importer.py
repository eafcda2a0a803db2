"""The receiving end: wait for the one acceptable exporter, write what it
sends, confirm only once the data is safe."""

from __future__ import annotations

import queue
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from corral import errors
from corral.node.impexp import channel, wire
from corral.node.impexp.codec import decoder
from corral.node.impexp.engine import (
    END,
    ImpExp,
    failure_kind,
    get,
    helper,
    new_hash,
    queues,
    text,
)
from corral.node.impexp.sinks import Sink


@dataclass
class ImportPlan:
    """What to accept and where to write it."""

    context: ssl.SSLContext
    connect_timeout: float
    magic: str
    compress: str
    # Opens the destination (in the stream's thread; a script starts here).
    open_sink: Callable[[ImpExp], Sink]


def _problem(plan: ImportPlan, header: wire.Header) -> str | None:
    if header.magic != plan.magic:
        return "wrong magic"
    if header.compress != plan.compress:
        return f"compression {header.compress}, expected {plan.compress}"
    return None


def _accept(
    plan: ImportPlan, stream: ImpExp, listener: socket.socket
) -> tuple[ssl.SSLSocket, wire.Header]:
    """The first connection with an acceptable certificate and header; the
    others are refused and noted, and the import keeps waiting."""
    deadline = time.monotonic() + plan.connect_timeout
    while True:
        stream.check()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise errors.OpExecError(f"No exporter connected within {plan.connect_timeout:g} s")
        listener.settimeout(remaining)
        try:
            raw, peer = listener.accept()
        except TimeoutError:
            continue
        channel.tune(raw)
        where = f"{peer[0]}:{peer[1]}"
        try:
            sock = channel.handshake(raw, plan.context, server_side=True)
        except (OSError, ssl.SSLError) as err:
            stream.note(f"refused a connection from {where}: {text(err)}")
            continue
        try:
            header = wire.read_header(sock)
            problem = _problem(plan, header)
            if problem is None:
                stream.note(f"accepted a connection from {where}")
                return sock, header
            wire.send_status(sock, problem)
            stream.note(f"refused a connection from {where}: {problem}")
        except (OSError, ssl.SSLError, errors.GenericError) as err:
            stream.note(f"refused a connection from {where}: {text(err)}")
        sock.close()


def _write_all(
    stream: ImpExp,
    sink: Sink,
    rings: tuple[queue.SimpleQueue[Any], ...],
    compress: str,
    digest: Any,
) -> None:
    free, full = rings
    dec = decoder(compress)
    while (item := get(stream, full)) is not END:
        buffer, size = item
        with memoryview(buffer)[:size] as view:
            if dec is None:
                if digest is not None:
                    digest.update(view)
                sink.write(view)
                stream.moved += size
            else:
                for piece in dec.feed(view):
                    if digest is not None:
                        digest.update(piece)
                    sink.write(piece)
                    stream.moved += len(piece)
        free.put(buffer)
    if dec is not None:
        dec.finish()
    sink.finish()


def _receive_all(
    stream: ImpExp, sock: ssl.SSLSocket, rings: tuple[queue.SimpleQueue[Any], ...]
) -> tuple[int, bytes]:
    free, full = rings
    scratch = memoryview(bytearray(4))
    while (size := wire.read_frame_length(sock, scratch)) > 0:
        buffer = get(stream, free)
        with memoryview(buffer)[:size] as view:
            wire.recv_exact(sock, view)
        full.put((buffer, size))
    full.put(END)
    return wire.read_trailer(sock)


def run_import(plan: ImportPlan, stream: ImpExp, listener: socket.socket) -> None:
    """The stream's body (in its thread)."""
    try:
        sock, header = _accept(plan, stream, listener)
    finally:
        listener.close()
    stream.sock = sock
    try:
        _stream(plan, stream, sock, header)
    finally:
        sock.close()


def _stream(plan: ImportPlan, stream: ImpExp, sock: ssl.SSLSocket, header: wire.Header) -> None:
    if stream.size is None:
        stream.size = header.size
    try:
        sink = plan.open_sink(stream)
    except errors.GenericError as err:
        wire.send_status(sock, err.message)
        raise
    stream.endpoint = sink
    try:
        wire.send_status(sock, None)
        sock.settimeout(None)
        stream.set_connected("connected")
        _receive(plan, stream, sock, sink, header.hashed)
    finally:
        sink.close()


def _receive(
    plan: ImportPlan, stream: ImpExp, sock: ssl.SSLSocket, sink: Sink, hashed: bool
) -> None:
    rings = queues(stream)
    digest = new_hash(hashed)
    writer = helper(stream, "write", lambda: _write_all(stream, sink, rings, plan.compress, digest))
    try:
        count, theirs = _receive_all(stream, sock, rings)
    except BaseException as err:
        stream.fail(f"{text(err)} after {stream.moved} bytes", failure_kind(err))
        raise
    finally:
        writer.join()
    mine = digest.digest() if digest is not None else wire.DIGEST_NONE
    error = stream.error
    if error is None and (count != stream.moved or theirs != mine):
        error = (
            f"received {stream.moved} bytes with digest {mine.hex()}, not the {count} bytes sent"
        )
    wire.send_reply(sock, stream.moved, mine, error)
    if error is not None:
        raise errors.OpExecError(error)
    stream.note(f"finished receiving {stream.moved} bytes")
