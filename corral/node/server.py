"""noded's HTTPS server: ``POST /<call>`` dispatched through the call table.

Mutual TLS is enforced by the SSL context: a client without a certificate
signed by the cluster CA fails the handshake and never reaches a handler.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from aiohttp import web

from corral import errors
from corral.crypto.certs import ssl_server_context
from corral.daemons.util import ReadyCallback, listen_error, one_line
from corral.node.context import NodeContext
from corral.node.handlers import get_handler
from corral.rpc.calls import CALLS

log = logging.getLogger(__name__)

# upload_file carries whole files in the request body.
MAX_REQUEST_SIZE = 64 * 1024 * 1024
# How long in-flight calls get to finish when noded stops.
SHUTDOWN_TIMEOUT = 2.0

CONTEXT_KEY = web.AppKey("context", NodeContext)


def _reply(success: bool, payload: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps([success, payload]).encode("utf-8"),
        status=status,
        content_type="application/json",
    )


async def _read_args(request: web.Request, name: str) -> list[Any]:
    try:
        args = json.loads(await request.read())
    except ValueError as err:
        raise errors.ParameterError(f"Invalid JSON body for {name}: {err}") from None
    if not isinstance(args, list):
        raise errors.ParameterError(f"The body of {name} must be a JSON list of arguments")
    try:
        return CALLS[name].check_args(args)
    except errors.ProgrammerError as err:
        raise errors.ParameterError(err.message) from None


async def dispatch(request: web.Request) -> web.Response:
    """Run the handler of the call named by the URL path; ``[success, payload]``."""
    name = request.match_info["call"]
    handler = get_handler(name)
    if handler is None:
        return _reply(False, f"Unknown RPC call {name!r}", status=404)
    try:
        args = await _read_args(request, name)
    except errors.ParameterError as err:
        return _reply(False, err.message, status=400)
    try:
        payload = await handler(request.app[CONTEXT_KEY], *args)
        return _reply(True, payload)
    except errors.GenericError as err:
        log.warning("RPC %s failed: %s", name, one_line(err))
        return _reply(False, one_line(err))
    except Exception as err:
        log.exception("RPC %s failed", name)
        return _reply(False, f"{err.__class__.__name__}: {one_line(err)}")


def make_app(ctx: NodeContext) -> web.Application:
    """The aiohttp application of noded for the node described by ``ctx``."""
    app = web.Application(client_max_size=MAX_REQUEST_SIZE)
    app[CONTEXT_KEY] = ctx
    app.router.add_post("/{call}", dispatch)
    return app


async def serve(ctx: NodeContext, ready: ReadyCallback) -> None:
    """Serve RPC on ``ctx.address:ctx.port`` until cancelled; ``ready()`` once listening."""
    ssl_ctx = ssl_server_context(ctx.paths)
    access_log = logging.getLogger("aiohttp.access") if ctx.debug else None
    runner = web.AppRunner(make_app(ctx), access_log=access_log)
    await runner.setup()
    try:
        site = web.TCPSite(
            runner,
            ctx.address,
            ctx.port,
            ssl_context=ssl_ctx,
            shutdown_timeout=SHUTDOWN_TIMEOUT,
        )
        try:
            await site.start()
        except OSError as err:
            raise listen_error(ctx.address, ctx.port, err) from None
        log.info("Listening on %s:%d (root %s)", ctx.address, ctx.port, ctx.paths.root)
        ready()
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
