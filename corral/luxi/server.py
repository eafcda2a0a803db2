"""The asyncio luxi server: framing, dispatch and errors, per connection.

Requests on one connection are answered in order; connections are
independent, so a client waiting for a job change never delays another.
A malformed message gets an error answer and the connection goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from corral import errors
from corral.gcpause import gc_paused
from corral.luxi import protocol

log = logging.getLogger(__name__)

Handler = Callable[[str, Any], Awaitable[Any]]


class LuxiServer:
    """Serves luxi on a unix socket, handing each request to ``handler``."""

    def __init__(self, path: Path, handler: Handler) -> None:
        self._path = path
        self._handler = handler
        self._server: asyncio.AbstractServer | None = None
        self._clients: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._path.unlink(missing_ok=True)
        self._server = await asyncio.start_unix_server(
            self._serve, path=str(self._path), limit=protocol.MAX_MESSAGE_SIZE
        )
        self._path.chmod(0o660)

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
        try:
            while True:
                try:
                    data = await reader.readuntil(protocol.ETX)
                except asyncio.IncompleteReadError:
                    return
                except asyncio.LimitOverrunError:
                    writer.write(protocol.encode_error(errors.LuxiError("Message too large")))
                    return
                writer.write(await self._answer(data[:-1]))
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
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
