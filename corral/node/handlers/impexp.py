"""Calls of exports, imports and moves: the streams run in threads of their
own (:mod:`corral.node.impexp`); these only start, inspect and stop them."""

from __future__ import annotations

import asyncio

from corral.crypto.certs import cert_info
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.impexp import engine, service, x509keys
from corral.rpc import calls_impexp as calls
from corral.rpc.calls_impexp import ImpExpOptions
from corral.rpc.wire import JsonObject


@rpc_handler(calls.x509_cert_create)
async def x509_cert_create(ctx: NodeContext, validity: int) -> list[str]:
    """A new per-move key: ``[name, cert_pem]`` (the key stays on this node)."""
    node = cert_info(ctx.paths.server_pem)["subject"] or ctx.address
    name, pem = await asyncio.to_thread(x509keys.create, ctx.paths, node, ctx.address, validity)
    return [name, pem]


@rpc_handler(calls.x509_cert_remove)
async def x509_cert_remove(ctx: NodeContext, name: str) -> None:
    await asyncio.to_thread(x509keys.remove, ctx.paths, name)


@rpc_handler(calls.import_start)
async def import_start(
    ctx: NodeContext,
    opts: ImpExpOptions,
    instance: JsonObject,
    component: str,
    dest: str,
    dest_args: JsonObject,
) -> str:
    return await service.start_import(ctx, opts, instance, component, dest, dest_args)


@rpc_handler(calls.export_start)
async def export_start(
    ctx: NodeContext,
    opts: ImpExpOptions,
    host: str,
    port: int,
    instance: JsonObject,
    component: str,
    source: str,
    source_args: JsonObject,
) -> str:
    return await service.start_export(
        ctx, opts, host, port, instance, component, source, source_args
    )


@rpc_handler(calls.impexp_status)
async def impexp_status(ctx: NodeContext, names: list[str]) -> list[JsonObject | None]:
    return service.status(names)


@rpc_handler(calls.impexp_wait)
async def impexp_wait(
    ctx: NodeContext, names: list[str], timeout: float
) -> list[JsonObject | None]:
    """impexp_status once one of the streams ended, or after ``timeout`` seconds."""
    return await service.wait(names, timeout)


@rpc_handler(calls.impexp_abort)
async def impexp_abort(ctx: NodeContext, name: str) -> None:
    service.abort(name)


@rpc_handler(calls.impexp_cleanup)
async def impexp_cleanup(ctx: NodeContext, name: str) -> None:
    await service.cleanup(name)


@rpc_handler(calls.test_impexp_gate)
async def test_impexp_gate(ctx: NodeContext, closed: bool) -> None:
    """Close (pause each export after its first frame) or open the gate."""
    engine.GATE.set(closed)
