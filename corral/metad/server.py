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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from corral.metad import trees
from corral.metad.listener import Deadlines, GuestLimits, TapSite, bound_device
from corral.metad.model import InstanceMetadata, RecordError
from corral.metad.progress import ProgressLog

log = logging.getLogger(__name__)

# The control API's largest request (a record with its user-data, base64).
MAX_RECORD = 1024 * 1024
READ_PATHS = frozenset(prefix + "read" for prefix in trees.GANETI_PREFIXES)
WRITE_PATHS = frozenset(prefix + "write" for prefix in trees.GANETI_PREFIXES)
NOT_FOUND = "Resource not found"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Entry:
    """One published instance."""

    meta: InstanceMetadata
    tap: str
    ip: str
    progress: ProgressLog = field(default_factory=ProgressLog)


class Metad:
    """The published instances and the taps listened on."""

    def __init__(self, address: str, port: int, limits: GuestLimits) -> None:
        self.address = address
        self.port = port
        self.limits = limits
        self.entries: dict[str, Entry] = {}
        self.endpoints: dict[tuple[str, str], str] = {}  # (tap, ip) -> instance
        self.sites: dict[str, TapSite] = {}
        self.deadlines = Deadlines(limits.request_timeout)
        self.guest_runner = web.AppRunner(
            guest_app(self),
            access_log=None,
            max_line_size=limits.max_head_line,
            max_field_size=limits.max_head_line,
            max_headers=limits.max_headers,
            keepalive_timeout=limits.request_timeout,
        )

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
            site = TapSite(
                self.guest_runner,
                entry.tap,
                self.address,
                self.port,
                deadlines=self.deadlines,
                max_connections=self.limits.max_connections,
            )
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


# The guests' side


def _not_found() -> web.Response:
    return web.Response(status=404, text=NOT_FOUND)


def guest_app(metad: Metad) -> web.Application:
    """The application guests reach on their taps."""

    @web.middleware
    async def whole_request(request: web.Request, handler: Handler) -> web.StreamResponse:
        # The body is read here, within the connection's deadline; then the deadline goes.
        try:
            await request.read()
            metad.deadlines.received(request.protocol)
            response: web.StreamResponse = await handler(request)
        except web.HTTPException as err:  # a body too large: 413
            response = web.Response(status=err.status, text=err.reason)
        response.force_close()  # one request per connection
        return response

    async def answer(request: web.Request) -> web.StreamResponse:
        sock = request.transport.get_extra_info("socket") if request.transport else None
        peer = request.transport.get_extra_info("peername") if request.transport else None
        tap = bound_device(sock) if sock is not None else ""
        entry = metad.find(tap, peer[0]) if peer else None
        if entry is None:
            # Debug only: a guest must not be able to fill the node's disk with log.
            log.debug("Unknown guest %s on %r asked for %s", peer, tap, request.path)
            return _not_found()
        return await _answer(entry, request)

    app = web.Application(middlewares=[whole_request], client_max_size=metad.limits.max_body)
    app.router.add_route("*", "/{tail:.*}", answer)
    return app


async def _answer(entry: Entry, request: web.Request) -> web.StreamResponse:
    path = request.path
    if path in WRITE_PATHS:
        if request.method not in ("POST", "PUT"):
            return web.Response(status=405, headers={"Allow": "POST, PUT"})
        text = (await request.read()).decode("utf-8", errors="replace")
        entry.progress.add(text)
        return web.Response(status=200, text="")
    if request.method not in ("GET", "HEAD"):
        return web.Response(status=405, headers={"Allow": "GET, HEAD"})
    if path in READ_PATHS:
        return web.Response(text="".join(f"{line}\n" for line in entry.progress.lines()))
    found = trees.lookup(entry.meta, path)
    if isinstance(found, trees.Document):
        return web.Response(body=found.body, headers={"Content-Type": found.content_type})
    if isinstance(found, trees.NodeFile):
        loop = asyncio.get_running_loop()
        if await loop.run_in_executor(None, os.path.isfile, found.path):
            return web.FileResponse(found.path)
        log.warning("%s: %s is not there", entry.meta.name, found.path)
    return _not_found()


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
    await metad.guest_runner.setup()
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
        await metad.guest_runner.cleanup()
        await control.cleanup()
        with contextlib.suppress(FileNotFoundError):
            control_socket.unlink()
