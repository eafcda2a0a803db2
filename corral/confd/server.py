"""confd inside corral-noded: a UDP endpoint on the node's address.

It answers from the node's ``config.data`` (kept on master candidates, the
master included) signed with the node's ``hmac.key``.  The configuration is
looked at when a request comes, and read again if it changed: an answer is
never older than the file (a file that arrived a moment before the request
is not answered as missing).  The key is looked at every
:data:`RELOAD_INTERVAL` seconds.  Both off the event loop.  A
node without ``config.data`` (not a candidate) answers every request with
an error saying so, as Ganeti's confd does while it has no configuration; a
node without ``hmac.key`` (not in a cluster) cannot sign and answers
nothing.  Requests that are not signed with the key, carry a clock too far
from this node's, or are malformed get no answer (logged at debug level),
as Ganeti's server does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from dataclasses import dataclass
from typing import Any, cast

from corral.confd import protocol
from corral.confd.answers import ConfdView
from corral.fileio import atomic_write
from corral.paths import Paths

log = logging.getLogger(__name__)

RELOAD_INTERVAL = 1.0  # seconds between two looks at the files
NO_CONFIG = (
    "No configuration on this node: config.data is kept on master candidates only"
    " (ask a master candidate)"
)

# A file's identity: (inode, size, mtime in ns); None if absent.
Stamp = tuple[int, int, int] | None


def _stamp(path: os.PathLike[str]) -> Stamp:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass
class _Loaded:
    """What the endpoint answers with: the key and the view (or why there is none)."""

    key: bytes | None = None
    view: ConfdView | None = None
    problem: str = NO_CONFIG


def _read_key(paths: Paths) -> bytes | None:
    try:
        return paths.confd_hmac_key.read_bytes() or None
    except OSError:
        return None


def _read_view(paths: Paths) -> tuple[ConfdView | None, str]:
    try:
        data = paths.config_data.read_bytes()
    except FileNotFoundError:
        return None, NO_CONFIG
    except OSError as err:
        return None, f"Cannot read the configuration: {err.strerror}"
    try:
        config = json.loads(data)
        return ConfdView(config), ""
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        return None, f"Corrupt configuration file: {err}"


class ConfdProtocol(asyncio.DatagramProtocol):
    """Answers each datagram from what is loaded (loading a changed
    configuration first); never raises on bad input."""

    def __init__(self, service: ConfdService) -> None:
        self._service = service
        self._loading: set[asyncio.Task[None]] = set()
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: Any) -> None:
        task = asyncio.get_running_loop().create_task(self._after_load(data, addr))
        self._loading.add(task)
        task.add_done_callback(self._loading.discard)

    async def _after_load(self, data: bytes, addr: Any) -> None:
        loaded = await self._service.current()
        self._send(respond(loaded, data, time.time()), addr)

    def _send(self, reply: bytes | None, addr: Any) -> None:
        if reply is not None and self.transport is not None:
            self.transport.sendto(reply, addr)

    def error_received(self, exc: Exception) -> None:
        log.debug("confd: %s", exc)


def respond(loaded: _Loaded, data: bytes, now: float) -> bytes | None:
    """The reply datagram to ``data``, or None when it gets no answer."""
    key = loaded.key
    if key is None:
        return None
    try:
        request = protocol.parse_request(key, data, now)
    except protocol.BadMessage as err:
        log.debug("confd: dropped a request: %s", err)
        return None
    if loaded.view is None:
        answer: tuple[int, Any, int] = (protocol.Status.ERROR, loaded.problem, 0)
    else:
        try:
            answer = loaded.view.answer(request)
        except Exception:  # a config.data Corral did not write: stay up
            log.exception("confd: cannot answer %s", request)
            answer = (protocol.Status.ERROR, protocol.ErrorCode.INTERNAL, 0)
    return protocol.pack_reply(key, request.rsalt, *answer)


class ConfdService:
    """The endpoint and its reloads, for the life of noded (see :meth:`run`).

    A changed key is read at once (it is small); a changed configuration
    only when a request comes: parsing it costs some tens of milliseconds
    per megabyte, and most changes are never asked about.
    """

    def __init__(self, paths: Paths, address: str, port: int) -> None:
        self.paths = paths
        self.address = address
        self.port = port
        self.loaded = _Loaded()
        self._key_stamp: Stamp = None
        self._view_stamp: Stamp | bool = False  # False: never read
        self._load_lock = asyncio.Lock()

    async def watch(self) -> None:
        """Look at the key once: read it if it changed."""
        stamp = await asyncio.to_thread(_stamp, self.paths.confd_hmac_key)
        if stamp != self._key_stamp or self.loaded.key is None:
            self.loaded.key = await asyncio.to_thread(_read_key, self.paths)
            self._key_stamp = stamp

    async def current(self) -> _Loaded:
        """What to answer with, the configuration read again if it changed."""
        async with self._load_lock:
            stamp = await asyncio.to_thread(_stamp, self.paths.config_data)
            if stamp != self._view_stamp:
                view, problem = await asyncio.to_thread(_read_view, self.paths)
                self.loaded.view, self.loaded.problem = view, problem
                self._view_stamp = stamp
                if view is not None:
                    log.info("confd: configuration loaded (cluster serial %d)", view.serial)
                elif problem != NO_CONFIG:
                    log.warning("confd: %s", problem)
        return self.loaded

    async def run(self) -> None:
        """Listen and keep reloading until cancelled; if the port is taken,
        log why and serve nothing (noded runs on without confd)."""
        loop = asyncio.get_running_loop()
        await self.watch()
        try:
            transport, _ = await loop.create_datagram_endpoint(
                lambda: ConfdProtocol(self), local_addr=(self.address, self.port)
            )
        except OSError as err:
            log.error(
                "confd: cannot listen on UDP %s:%d: %s; confd is off on this node",
                self.address,
                self.port,
                err.strerror or err,
            )
            return
        endpoint = self.paths.confd_endpoint
        try:
            host, port = transport.get_extra_info("sockname")[:2]
            await asyncio.to_thread(atomic_write, endpoint, f"{host} {port}\n".encode())
            log.info("confd: listening on UDP %s:%d", host, port)
            while True:
                await asyncio.sleep(RELOAD_INTERVAL)
                await self.watch()
        finally:
            transport.close()
            endpoint.unlink(missing_ok=True)
