"""corral-metad's two faces: the guests' HTTP on their communication taps, and
noded's control API on a Unix socket in the node's run directory.

Control API (JSON; the socket is root's only):

- ``PUT /instances/<name>`` ``{"tap": ..., "ip": ..., "metadata": <record>}``:
  publish (or replace) an instance's data, reachable from ``ip`` on ``tap``;
  metad starts listening on the tap.  409 if it cannot or if another instance
  holds that tap and address; 400 for a malformed record.  Nothing changes on error.
- ``DELETE /instances/<name>``: withdraw it (and its secrets); idempotent.
- ``GET /instances/<name>/progress``: ``{"lines": [...]}``, the progress lines
  its install wrote since the last call (each line is handed out once).

A guest is known by the tap its request arrived on AND its source address; any
other request gets a 404 that names nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from corral.metad import trees, wire
from corral.metad.listener import GuestLimits, Reply, TapSite
from corral.metad.model import InstanceMetadata, RecordError
from corral.metad.progress import ProgressLog
from corral.metad.wire import NOT_FOUND as NOT_FOUND  # what strangers are told
from corral.metad.wire import NOT_FOUND_ANSWER

log = logging.getLogger(__name__)

# The control API's largest request (a record with its user-data, base64).
MAX_RECORD = 1024 * 1024
READ_PATHS = frozenset(prefix + "read" for prefix in trees.GANETI_PREFIXES)
WRITE_PATHS = frozenset(prefix + "write" for prefix in trees.GANETI_PREFIXES)
# Metad's answers to a request other than GET or HEAD (and to a read of write).
_READ_ONLY = wire.response(405, headers=(("Allow", "GET, HEAD"),))
_WRITE_ONLY = wire.response(405, headers=(("Allow", "POST, PUT"),))
_WRITTEN = wire.response(200)


@dataclass
class Entry:
    """One published instance, its answers rendered."""

    meta: InstanceMetadata
    tap: str
    ip: str
    progress: ProgressLog = field(default_factory=ProgressLog)
    # Each path's whole answer (or the node file to send), by canonical path.
    answers: dict[str, Reply] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.answers = {path: _reply(found) for path, found in trees.tree(self.meta).items()}


def _reply(found: trees.Answer) -> Reply:
    if isinstance(found, trees.NodeFile):
        return found
    return wire.response(200, found.body, found.content_type)


class Metad:
    """The published instances and the taps listened on."""

    def __init__(self, address: str, port: int, limits: GuestLimits) -> None:
        self.address = address
        self.port = port
        self.limits = limits
        self.entries: dict[str, Entry] = {}
        self.endpoints: dict[tuple[str, str], str] = {}  # (tap, ip) -> instance
        self.sites: dict[str, TapSite] = {}

    def find(self, tap: str, ip: str) -> Entry | None:
        name = self.endpoints.get((tap, ip))
        return self.entries.get(name) if name else None

    async def publish(self, entry: Entry) -> None:
        """Publish ``entry``; OSError if its tap cannot be listened on,
        ValueError if another instance holds its tap and address."""
        name = entry.meta.name
        holder = self.endpoints.get((entry.tap, entry.ip))
        if holder not in (None, name):
            raise ValueError(f"{entry.ip} on {entry.tap} belongs to instance {holder}")
        stale = self.sites.get(entry.tap)
        if stale is not None and not stale.is_current():
            # The tap was made again (the instance restarted): a new socket for it.
            del self.sites[entry.tap]
            await stale.stop()
        if entry.tap not in self.sites:
            site = TapSite(entry.tap, self.address, self.port, self.limits, self.answer)
            await site.start()
            self.sites[entry.tap] = site
            log.info("Listening on %s", site.name)
        old = self.entries.get(name)
        if old is not None:
            entry.progress = old.progress
            self.endpoints.pop((old.tap, old.ip), None)
        self.entries[name] = entry
        self.endpoints[(entry.tap, entry.ip)] = name
        if old is not None:
            await self._unused_tap(old.tap)
        log.info("Published %s (%s on %s)", name, entry.ip, entry.tap)

    async def withdraw(self, name: str) -> None:
        """Forget ``name`` (its secrets with it); stop listening on a tap left unused."""
        entry = self.entries.pop(name, None)
        if entry is None:
            return
        self.endpoints.pop((entry.tap, entry.ip), None)
        await self._unused_tap(entry.tap)
        log.info("Withdrew %s", name)

    async def _unused_tap(self, tap: str) -> None:
        if any(t == tap for t, _ in self.endpoints):
            return
        site = self.sites.pop(tap, None)
        if site is not None:
            await site.stop()
            log.info("Stopped listening on %s", tap)

    def answer(self, tap: str, source: str, head: wire.Head, body: bytes) -> Reply:
        """The answer to the request ``head`` (with ``body``) from ``source`` on ``tap``."""
        entry = self.find(tap, source)
        if entry is None:
            # Debug only: a guest must not be able to fill the node's disk with log.
            log.debug("Unknown guest %s on %r asked for %s", source, tap, head.path)
            return NOT_FOUND_ANSWER
        return _answer(entry, head, body)


def _answer(entry: Entry, head: wire.Head, body: bytes) -> Reply:
    if head.path in WRITE_PATHS:
        if head.method not in ("POST", "PUT"):
            return _WRITE_ONLY
        entry.progress.add(body.decode("utf-8", errors="replace"))
        return _WRITTEN
    if head.method not in ("GET", "HEAD"):
        return _READ_ONLY
    if head.path in READ_PATHS:
        text = "".join(f"{line}\n" for line in entry.progress.lines())
        return wire.response(200, text.encode())
    return entry.answers.get(trees.canonical(head.path), NOT_FOUND_ANSWER)


# noded's side


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _endpoint(body: dict[str, Any]) -> tuple[str, str]:
    tap, ip = body.get("tap"), body.get("ip")
    if not isinstance(tap, str) or not 0 < len(tap.encode()) < 16 or "/" in tap:
        raise RecordError("'tap' must be an interface name (1 to 15 bytes)")
    if not isinstance(ip, str):
        raise RecordError("'ip' must be the guest's IPv4 address on its tap")
    ipaddress.IPv4Address(ip)
    return tap, ip


def control_app(metad: Metad) -> web.Application:
    """noded's API (see the module's docstring)."""

    async def put(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        try:
            body = json.loads(await request.read())
            if not isinstance(body, dict):
                raise RecordError("expected a JSON object")
            tap, ip = _endpoint(body)
            meta = InstanceMetadata.from_record(body.get("metadata"))
        except (ValueError, RecordError) as err:
            return _error(400, f"Bad record for {name}: {err}")
        if meta.name != name:
            return _error(400, f"The record is {meta.name!r}'s, not {name!r}'s")
        try:
            await metad.publish(Entry(meta, tap, ip))
        except ValueError as err:
            return _error(409, f"Cannot publish {name}: {err}")
        except OSError as err:
            reason = os.strerror(err.errno) if err.errno else str(err)
            return _error(409, f"Cannot listen on {metad.address}:{metad.port} on {tap}: {reason}")
        return web.json_response({"instance_id": meta.instance_id})

    async def delete(request: web.Request) -> web.Response:
        await metad.withdraw(request.match_info["name"])
        return web.json_response({})

    async def progress(request: web.Request) -> web.Response:
        entry = metad.entries.get(request.match_info["name"])
        if entry is None:
            return _error(404, f"Instance {request.match_info['name']} is not published")
        return web.json_response({"lines": entry.progress.take()})

    app = web.Application(client_max_size=MAX_RECORD)
    app.router.add_put("/instances/{name}", put)
    app.router.add_delete("/instances/{name}", delete)
    app.router.add_get("/instances/{name}/progress", progress)
    return app


async def serve_metad(metad: Metad, control_socket: Path, ready: Callable[[], None]) -> None:
    """Serve ``metad`` until cancelled: the control socket first, taps as published."""
    control = web.AppRunner(control_app(metad), access_log=None)
    await control.setup()
    try:
        control_socket.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            control_socket.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(control_socket))
        os.chmod(control_socket, 0o600)  # before listening: no one else ever connects
        site = web.SockSite(control, sock)
        await site.start()
        log.info("Control API on %s", control_socket)
        ready()
        await asyncio.Event().wait()
    finally:
        for name in list(metad.entries):
            await metad.withdraw(name)
        await control.cleanup()
        with contextlib.suppress(FileNotFoundError):
            control_socket.unlink()
