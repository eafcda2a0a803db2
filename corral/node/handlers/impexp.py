"""Calls of exports, imports and moves: the streams run in threads of their
own (:mod:`corral.node.impexp`); these only start, inspect and stop them."""

from __future__ import annotations

import asyncio
from typing import Any

from corral import errors
from corral.crypto.certs import cert_info
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.impexp import engine, service, x509keys


@rpc_handler("x509_cert_create")
async def x509_cert_create(ctx: NodeContext, validity: Any) -> list[str]:
    """A new per-move key: ``[name, cert_pem]`` (the key stays on this node)."""
    node = cert_info(ctx.paths.server_pem)["subject"] or ctx.address
    name, pem = await asyncio.to_thread(x509keys.create, ctx.paths, node, ctx.address, validity)
    return [name, pem]


@rpc_handler("x509_cert_remove")
async def x509_cert_remove(ctx: NodeContext, name: Any) -> None:
    await asyncio.to_thread(x509keys.remove, ctx.paths, name)


@rpc_handler("import_start")
async def import_start(
    ctx: NodeContext, opts: Any, instance: Any, component: Any, dest: Any, dest_args: Any
) -> str:
    return await service.start_import(ctx, opts, instance, component, dest, dest_args)


@rpc_handler("export_start")
async def export_start(
    ctx: NodeContext,
    opts: Any,
    host: Any,
    port: Any,
    instance: Any,
    component: Any,
    source: Any,
    source_args: Any,
) -> str:
    return await service.start_export(
        ctx, opts, host, port, instance, component, source, source_args
    )


@rpc_handler("impexp_status")
async def impexp_status(ctx: NodeContext, names: Any) -> list[dict[str, Any] | None]:
    return service.status(names)


@rpc_handler("impexp_wait")
async def impexp_wait(ctx: NodeContext, names: Any, timeout: Any) -> list[dict[str, Any] | None]:
    """impexp_status once one of the streams ended, or after ``timeout`` seconds."""
    return await service.wait(names, timeout)


@rpc_handler("impexp_abort")
async def impexp_abort(ctx: NodeContext, name: Any) -> None:
    service.abort(name)


@rpc_handler("impexp_cleanup")
async def impexp_cleanup(ctx: NodeContext, name: Any) -> None:
    await service.cleanup(name)


@rpc_handler("test_impexp_gate")
async def test_impexp_gate(ctx: NodeContext, closed: Any) -> None:
    """Close (pause each export after its first frame) or open the gate."""
    if not isinstance(closed, bool):
        raise errors.OpExecError(f"Invalid gate state {closed!r}")
    engine.GATE.set(closed)
