"""noded's console relay: a WebSocket to an instance's serial console.

Corral has no ssh between nodes, so ``gnt-instance console`` reaches a serial
console through the instance's node daemon: ``GET /console/<instance>`` on
noded's TLS server, upgraded to a WebSocket whose binary messages carry the
console's bytes both ways, bridged to the unix socket the hypervisor serves
(``Hypervisor.serial_socket``).  Only the cluster's client certificate (the
one masterd uses, readable by root on the master alone) is let in: the
nodes' own certificates, signed by the same CA, are not.

Every client gets its own connection to the socket, as several socat
processes would; whether the hypervisor serves them all at once is its own
business (QEMU serves one, the next waits until it leaves).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from aiohttp import WSCloseCode, WSMsgType, web

from corral import errors
from corral.node import peer
from corral.node.context import NodeContext
from corral.node.hypervisor import available

log = logging.getLogger(__name__)

CONSOLE_PATH = "/console/{instance}"
_CHUNK = 64 * 1024


def _allowed(ctx: NodeContext, request: web.Request) -> bool:
    """Whether the request comes from the cluster's client certificate."""
    membership = ctx.membership
    if membership is not None and not membership.authenticated(request):
        return False
    return peer.is_cluster_client(request)


async def _serial_socket(ctx: NodeContext, name: str) -> Path:
    """The serial socket of the running instance ``name``; OpExecError if none."""
    if not name or "/" in name or name.startswith("."):
        raise errors.OpExecError(f"Invalid instance name '{name}'")
    for hypervisor in available(ctx.paths):
        if not await hypervisor.instances_info([name]):
            continue
        socket = hypervisor.serial_socket(name)
        if socket is None:
            raise errors.OpExecError(f"Instance {name} has no serial console")
        return socket
    raise errors.OpExecError(f"Instance {name} is not running on this node")


async def _to_client(reader: asyncio.StreamReader, ws: web.WebSocketResponse) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(_CHUNK):
            await ws.send_bytes(data)


async def _to_console(ws: web.WebSocketResponse, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        async for message in ws:
            if message.type == WSMsgType.BINARY:
                writer.write(message.data)
            elif message.type == WSMsgType.TEXT:
                writer.write(message.data.encode())
            await writer.drain()


async def _bridge(
    ws: web.WebSocketResponse, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Copy both ways until either side ends, then close both."""
    tasks = {
        asyncio.ensure_future(_to_client(reader, ws)),
        asyncio.ensure_future(_to_console(ws, writer)),
    }
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
        await ws.close()


async def relay(
    ctx: NodeContext, request: web.Request, attached: set[web.WebSocketResponse]
) -> web.StreamResponse:
    """Serve one console client (see the module's docstring); while it is
    attached its WebSocket is in ``attached``."""
    if not _allowed(ctx, request):
        return web.Response(status=403, text="Only the cluster's client certificate may attach")
    name = request.match_info["instance"]
    try:
        socket = await _serial_socket(ctx, name)
        reader, writer = await asyncio.open_unix_connection(str(socket))
    except errors.GenericError as err:
        return web.Response(status=404, text=err.message)
    except OSError as err:
        text = f"Cannot connect to the serial console of {name}: {err.strerror or err}"
        return web.Response(status=502, text=text)
    ws = web.WebSocketResponse()
    try:
        await ws.prepare(request)
    except BaseException:
        writer.close()
        raise
    log.info("Console of %s attached", name)
    attached.add(ws)
    try:
        await _bridge(ws, reader, writer)
    finally:
        attached.discard(ws)
        log.info("Console of %s detached", name)
    return ws


def add_routes(app: web.Application, ctx: NodeContext) -> None:
    """Serve the console relay on noded's app; detach every client when it stops."""
    attached: set[web.WebSocketResponse] = set()

    async def _relay(request: web.Request) -> web.StreamResponse:
        return await relay(ctx, request, attached)

    async def _detach_all(_: web.Application) -> None:
        # An attached console never ends by itself: noded would wait for it.
        for ws in list(attached):
            await ws.close(code=WSCloseCode.GOING_AWAY, message=b"The node daemon stops")

    app.router.add_get(CONSOLE_PATH, _relay)
    app.on_shutdown.append(_detach_all)
