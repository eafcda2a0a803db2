"""noded's HTTPS server: ``POST /<call>`` dispatched through the call table.

Mutual TLS is enforced by the SSL context: a client without a certificate
signed by the cluster CA fails the handshake and never reaches a handler.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
from typing import Any

from aiohttp import web

from corral import errors
from corral.http.accepting import fd_limit
from corral.http.limits import ConnectionLimits
from corral.http.listener import GuardedTCPSite
from corral.node import join_protocol as J
from corral.node.console_relay import add_routes as add_console_routes
from corral.node.context import NodeContext
from corral.node.handlers import get_handler
from corral.node.hypervisor import available
from corral.node.impexp import service as impexp_service
from corral.node.join_server import Membership, serve_join
from corral.node.transfer_receive import add_routes as add_transfer_routes
from corral.paths import Paths
from corral.process.daemons import ReadyCallback, listen_error, one_line
from corral.rpc.calls import CALLS

log = logging.getLogger(__name__)

# upload_file carries whole files in the request body.
MAX_REQUEST_SIZE = 64 * 1024 * 1024
# A connection made before the node last joined or left its cluster.
_STALE = "This connection was made before the node joined its cluster; connect again"
# How long in-flight calls get to finish when noded stops; then they are cancelled.
SHUTDOWN_GRACE = 1.0

CONTEXT_KEY = web.AppKey("context", NodeContext)
INFLIGHT_KEY = web.AppKey("inflight", set[asyncio.Task[Any]])


def _text(err: BaseException) -> str:
    text = err.message if isinstance(err, errors.GenericError) else str(err)
    return text.strip() or err.__class__.__name__


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
    membership = request.app[CONTEXT_KEY].membership
    if membership is not None and not membership.authenticated(request):
        return _reply(False, J.NOT_IN_CLUSTER if not membership.joined else _STALE, status=403)
    handler = get_handler(name)
    if handler is None:
        return _reply(False, f"Unknown RPC call {name!r}", status=404)
    try:
        args = await _read_args(request, name)
    except errors.ParameterError as err:
        return _reply(False, err.message, status=400)
    inflight = request.app[INFLIGHT_KEY]
    task = asyncio.current_task()
    assert task is not None
    inflight.add(task)
    try:
        payload = await handler(request.app[CONTEXT_KEY], *args)
        return _reply(True, payload)
    except errors.GenericError as err:
        # Only the first line: the rest may be a script's output, which may quote
        # a secret parameter, and the log is on disk.
        log.warning("RPC %s failed: %s", name, _text(err).splitlines()[0])
        # The first line says what failed; further lines (a script's output) stay lines.
        return _reply(False, _text(err))
    except Exception as err:
        log.exception("RPC %s failed", name)
        return _reply(False, f"{err.__class__.__name__}: {one_line(err)}")
    finally:
        inflight.discard(task)


def make_app(ctx: NodeContext) -> web.Application:
    """The aiohttp application of noded for the node described by ``ctx``."""
    app = web.Application(client_max_size=MAX_REQUEST_SIZE)
    app[CONTEXT_KEY] = ctx
    app[INFLIGHT_KEY] = set()
    membership = ctx.membership
    if membership is not None:
        for path, step in ((J.HELLO_PATH, "hello"), (J.FINISH_PATH, "finish")):
            app.router.add_post(path, functools.partial(_join, membership=membership, step=step))
    add_transfer_routes(app, ctx)
    add_console_routes(app, ctx)
    app.router.add_post("/{call}", dispatch)
    app.on_startup.append(functools.partial(_hypervisors_up, paths=ctx.paths))
    app.on_startup.append(functools.partial(_impexp_up, ctx=ctx))
    app.on_cleanup.append(_impexp_down)
    app.on_cleanup.append(functools.partial(_hypervisors_down, paths=ctx.paths))
    return app


async def _hypervisors_up(_: web.Application, *, paths: Paths) -> None:
    """Take up the instances that kept running while noded was down."""
    for hypervisor in available(paths):
        await hypervisor.resume()


async def _impexp_up(_: web.Application, *, ctx: NodeContext) -> None:
    """Remove what the streams and moves of a previous noded left behind."""
    await asyncio.to_thread(impexp_service.startup, ctx)


async def _impexp_down(_: web.Application) -> None:
    """Stop the streams: their scripts run in sessions of their own, which
    would outlive noded."""
    impexp_service.shutdown()


async def _hypervisors_down(_: web.Application, *, paths: Paths) -> None:
    for hypervisor in available(paths):
        await hypervisor.close()


async def _join(request: web.Request, *, membership: Membership, step: str) -> web.Response:
    return await serve_join(request, membership, step)


async def _shutdown(runner: web.AppRunner, inflight: set[asyncio.Task[Any]]) -> None:
    """Stop listening, give running calls SHUTDOWN_GRACE seconds, cancel the rest."""
    for site in list(runner.sites):
        await site.stop()
    if inflight:
        log.info("Waiting for %d running call(s)", len(inflight))
        _, pending = await asyncio.wait(set(inflight), timeout=SHUTDOWN_GRACE)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
    await runner.cleanup()


async def serve(ctx: NodeContext, limits: ConnectionLimits, ready: ReadyCallback) -> None:
    """Serve RPC on ``ctx.address:ctx.port`` until cancelled; ``ready()`` once listening.

    A node without cluster certificates serves only the join exchange until it
    has joined (:mod:`corral.node.join_server`).
    """
    membership = Membership(ctx.paths)
    ctx = dataclasses.replace(ctx, membership=membership)
    ssl_ctx = membership.ssl_context()
    access_log = logging.getLogger("aiohttp.access") if ctx.debug else None
    app = make_app(ctx)
    runner = web.AppRunner(app, access_log=access_log, keepalive_timeout=limits.idle_timeout)
    await runner.setup()
    limits = limits.within_fd_limit(fd_limit())
    try:
        site = GuardedTCPSite(runner, ctx.address, ctx.port, ssl_context=ssl_ctx, limits=limits)
        membership.attach(site)
        try:
            await site.start()
        except OSError as err:
            raise listen_error(ctx.address, ctx.port, err) from None
        log.info("Listening on %s:%d (root %s)", ctx.address, ctx.port, ctx.paths.root)
        if not membership.joined:
            log.info(
                "Not in a cluster: waiting to be added with a join token; this node's"
                " certificate fingerprint is %s",
                membership.fingerprint(),
            )
        log.info(
            "At most %d connections, %d of them unauthenticated; TLS handshake time-out"
            " %g s, idle time-out %g s",
            limits.max_connections,
            limits.max_unauthenticated,
            limits.handshake_timeout,
            limits.idle_timeout,
        )
        ready()
        await asyncio.Event().wait()
    finally:
        # In a task of its own, as this one is being cancelled.
        await asyncio.shield(_shutdown(runner, app[INFLIGHT_KEY]))
