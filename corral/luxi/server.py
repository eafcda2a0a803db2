"""The asyncio luxi server: framing, dispatch and errors, per connection.

Requests on one connection are answered in order; connections are
independent, so a client waiting for a job change never delays another.
A malformed message gets an error answer and the connection goes on; so does
one too large, whose bytes are skipped up to its terminator, unparsed.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from corral import errors
from corral.gcpause import gc_paused
from corral.luxi import protocol

log = logging.getLogger(__name__)

Handler = Callable[[str, Any], Awaitable[Any]]


# Bytes read from a connection at a time (also what asyncio buffers unread).
READ_CHUNK = 256 * 1024


class BufferPool:
    """The memory every connection's unfinished request holds, bounded in all."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self, size: int) -> bool:
        """Reserve ``size`` bytes; False (nothing reserved) if over the limit."""
        if self.used + size > self.limit:
            return False
        self.used += size
        return True

    def give(self, size: int) -> None:
        self.used -= size


def _open_to_group(socket_path: Path, group: str) -> None:
    """Let ``group`` (corral-rapi's) use the socket: the socket and its
    directory belong to it, read and write for the socket, search for the
    directory; nothing for others."""
    import grp

    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        log.warning("Group %s does not exist: only root can use %s", group, socket_path)
        return
    directory = socket_path.parent
    os.chown(directory, -1, gid)
    directory.chmod(0o750)
    os.chown(socket_path, -1, gid)


class LuxiServer:
    """Serves luxi on a unix socket, handing each request to ``handler``.

    A request longer than ``max_message`` bytes, or one that would take the
    requests being received on all connections over ``max_buffered`` bytes,
    is answered with an error without being read further: the rest of it, up
    to its terminator, is skipped and the connection goes on.
    """

    def __init__(
        self,
        path: Path,
        handler: Handler,
        max_message: int = protocol.MAX_MESSAGE_SIZE,
        max_buffered: int = protocol.MAX_BUFFERED,
        group: str | None = None,
    ) -> None:
        self._path = path
        self._group = group
        self._handler = handler
        self._server: asyncio.AbstractServer | None = None
        self._clients: set[asyncio.Task[None]] = set()
        self._max_message = max_message
        self._pool = BufferPool(max_buffered)

    async def start(self) -> None:
        self._path.unlink(missing_ok=True)
        self._server = await asyncio.start_unix_server(
            self._serve, path=str(self._path), limit=READ_CHUNK
        )
        self._path.chmod(0o660)
        if self._group:
            _open_to_group(self._path, self._group)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._clients):
            task.cancel()
        if self._clients:
            await asyncio.wait(self._clients, timeout=5)
        self._path.unlink(missing_ok=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        request = _Request(self._pool, self._max_message)
        try:
            while chunk := await reader.read(READ_CHUNK):
                for part, complete in _split(chunk):
                    refusal = request.add(part)
                    if refusal is not None:
                        writer.write(protocol.encode_error(refusal))
                        await writer.drain()
                    if complete:
                        data = request.finish()
                        if data is not None:
                            writer.write(await self._answer(data))
                            await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            request.release()
            self._clients.discard(task)
            writer.close()

    async def _answer(self, data: bytes) -> bytes:
        try:
            method, args = protocol.parse_request(data)
        except errors.LuxiError as err:
            # As luxid: a request that cannot be parsed gets a plain string.
            return protocol.encode_response(False, f"Failed to parse request: {err.message}")
        try:
            result = await self._handler(method, args)
            with gc_paused():  # a big answer is a tree of fresh lists, with no cycles
                return protocol.encode_response(True, result)
        except protocol.UndecodableArguments as err:
            return protocol.encode_response(False, f"Failed to parse request: {err.message}")
        except errors.GenericError as err:
            return protocol.encode_error(err)
        except Exception as err:
            log.exception("Error while handling a luxi request")
            return protocol.encode_error(errors.ProgrammerError(f"Internal error: {err}"))


def _split(chunk: bytes) -> list[tuple[bytes, bool]]:
    """``chunk`` cut at each terminator: ``(part, ends_a_message)`` pairs."""
    parts = chunk.split(protocol.ETX)
    return [(part, True) for part in parts[:-1]] + [(parts[-1], False)]


class _Request:
    """The request being received on one connection, within the limits."""

    def __init__(self, pool: BufferPool, max_message: int) -> None:
        self._pool = pool
        self._max_message = max_message
        self._data = bytearray()
        self._skipping = False  # refused: what is left of it is thrown away

    def add(self, part: bytes) -> errors.LuxiError | None:
        """Take the next bytes of the request; the error to answer if it is refused."""
        if self._skipping or not part:
            return None
        size = len(self._data) + len(part)
        if size > self._max_message:
            return self._refuse(
                f"Request too large: more than {self._max_message} bytes"
                f" (the limit is masterd's --luxi-max-message-size)"
            )
        if not self._pool.take(len(part)):
            return self._refuse(
                f"Request refused: masterd holds {self._pool.used} bytes of requests being"
                f" received, its limit (--luxi-max-buffered); try again later"
            )
        self._data += part
        return None

    def _refuse(self, message: str) -> errors.LuxiError:
        self.release()
        self._skipping = True
        return errors.LuxiError(message)

    def finish(self) -> bytes | None:
        """The complete request, or None if it was refused; ready for the next."""
        data = None if self._skipping else bytes(self._data)
        self.release()
        self._skipping = False
        return data

    def release(self) -> None:
        """Give the buffered bytes back to the pool."""
        self._pool.give(len(self._data))
        self._data = bytearray()
