"""noded's HTTPS server: ``POST /<call>`` dispatched through the call table.

Mutual TLS is enforced by the SSL context: a client without a certificate
signed by the cluster CA fails the handshake and never reaches a handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from corral import errors
from corral.confd.server import ConfdService
from corral.http.accepting import fd_limit
from corral.http.limits import ConnectionLimits
from corral.http.listener import GuardedTCPSite
from corral.mond.server import Mond
from corral.node import etcd_member, peer
from corral.node import join_protocol as J
from corral.node.console_relay import add_routes as add_console_routes
from corral.node.context import NodeContext
from corral.node.dispatch import reply, run_call
from corral.node.hypervisor import available
from corral.node.impexp import service as impexp_service
from corral.node.join_server import Membership, serve_join
from corral.node.transfer_receive import add_routes as add_transfer_routes
from corral.paths import Paths
from corral.process.daemons import ReadyCallback, listen_error
from corral.rpc import versions
from corral.rpc.calls import CALLS
from corral.rpc.fencing import FENCE_HEADER, UNTIL_HEADER, parse_header, parse_until
from corral.rpc.transport import WireReply

log = logging.getLogger(__name__)

# upload_file carries whole files in the request body.
MAX_REQUEST_SIZE = 64 * 1024 * 1024
# A connection made before the node last joined or left its cluster.
_STALE = "This connection was made before the node joined its cluster; connect again"
# How long in-flight calls get to finish when noded stops; then they are cancelled.
SHUTDOWN_GRACE = 1.0

CONTEXT_KEY = web.AppKey("context", NodeContext)
INFLIGHT_KEY = web.AppKey("inflight", set[asyncio.Task[Any]])


def _response(answer: WireReply) -> web.Response:
    # Every answer says the node's version (corral.rpc.versions).
    return web.Response(
        body=answer.body,
        status=answer.status,
        content_type="application/json",
        headers=versions.headers(),
    )


async def dispatch(request: web.Request) -> web.Response:
    """Run the handler of the call named by the URL path; ``[success, payload]``."""
    name = request.match_info["call"]
    membership = request.app[CONTEXT_KEY].membership
    if membership is not None and not membership.authenticated(request):
        denied = J.NOT_IN_CLUSTER if not membership.joined else _STALE
        return _response(reply(False, denied, status=403))
    refusal = _refusal(name, request) or _version_refusal(name, request)
    if refusal is not None:
        return _response(refusal)
    try:
        fence = parse_header(request.headers.get(FENCE_HEADER))
        until = parse_until(request.headers.get(UNTIL_HEADER))
    except ValueError as err:
        return _response(reply(False, str(err), status=400))
    inflight = request.app[INFLIGHT_KEY]
    task = asyncio.current_task()
    assert task is not None
    inflight.add(task)
    try:
        body = await request.read()
        return _response(await run_call(request.app[CONTEXT_KEY], name, body, fence, until))
    finally:
        inflight.discard(task)


def _refusal(name: str, request: web.Request) -> WireReply | None:
    """The answer to a call the caller may not make (logged), else None; the
    calls that only the cluster's client certificate may make are logged with
    their caller."""
    call = CALLS.get(name)
    if call is None or not call.cluster_client_only:
        return None
    caller = peer.describe(request)
    if not peer.is_cluster_client(request):
        log.warning("Refused %s from %s: not the cluster's client certificate", name, caller)
        text = f"{name} is only for the cluster's client certificate (root on the master)"
        return reply(False, text, status=403)
    log.info("%s called by %s", name, caller)
    return None


def _version_refusal(name: str, request: web.Request) -> WireReply | None:
    """The answer to a caller whose version is too far from this node's
    (logged), else None."""
    caller = versions.of_headers(request.headers.get)
    node = request.app[CONTEXT_KEY].address
    mismatch = versions.too_far(caller, versions.OWN, node)
    if mismatch is None:
        return None
    log.warning("Refused %s from %s: %s", name, peer.describe(request), mismatch)
    return reply(False, mismatch, status=versions.MISMATCH_STATUS)


def make_app(ctx: NodeContext) -> web.Application:
    """The aiohttp application of noded for the node described by ``ctx``."""
    app = web.Application(client_max_size=MAX_REQUEST_SIZE)
    app[CONTEXT_KEY] = ctx
    app[INFLIGHT_KEY] = set()
    membership = ctx.membership
    if membership is not None:
        for path, step in ((J.HELLO_PATH, "hello"), (J.FINISH_PATH, "finish")):
            app.router.add_post(path, functools.partial(_join, membership=membership, step=step))
        app.on_cleanup.append(functools.partial(_fence_down, membership=membership))
    add_transfer_routes(app, ctx)
    add_console_routes(app, ctx)
    app.router.add_post("/{call}", dispatch)
    app.on_startup.append(functools.partial(_hypervisors_up, paths=ctx.paths))
    app.on_startup.append(functools.partial(_impexp_up, ctx=ctx))
    app.on_startup.append(functools.partial(_etcd_up, paths=ctx.paths))
    app.on_cleanup.append(_impexp_down)
    app.on_cleanup.append(functools.partial(_etcd_down, paths=ctx.paths))
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


async def _etcd_up(_: web.Application, *, paths: Paths) -> None:
    """Start the etcd member this node ran (a master candidate's), if any."""
    try:
        await etcd_member.keeper(paths).resume()
    except (errors.GenericError, OSError) as err:  # noded serves anyway: verify reports it
        log.error("Cannot start this node's etcd member: %s", err)


async def _etcd_down(_: web.Application, *, paths: Paths) -> None:
    """Stop the member with noded (it runs in a session of its own)."""
    await etcd_member.keeper(paths).stop(forget=False)


async def _fence_down(_: web.Application, *, membership: Membership) -> None:
    """Log the window of the fence token in force (the last calls let in)."""
    membership.fence.close_window()


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
        async with _confd(ctx), _mond(ctx):
            ready()
            await asyncio.Event().wait()
    finally:
        # In a task of its own, as this one is being cancelled.
        await asyncio.shield(_shutdown(runner, app[INFLIGHT_KEY]))


@contextlib.asynccontextmanager
async def _confd(ctx: NodeContext) -> AsyncIterator[None]:
    """confd on the node's address while the block runs (if it has a port)."""
    if ctx.confd_port is None:
        yield
        return
    task = asyncio.create_task(ConfdService(ctx.paths, ctx.address, ctx.confd_port).run())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@contextlib.asynccontextmanager
async def _mond(ctx: NodeContext) -> AsyncIterator[None]:
    """mond on the node's address while the block runs (if it has a port)."""
    if ctx.mond_port is None:
        yield
        return
    task = asyncio.create_task(Mond(ctx.paths, ctx.address).run(ctx.mond_port))
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
