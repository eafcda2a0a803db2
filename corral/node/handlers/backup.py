"""Calls about instance exports (backups) kept on the node."""

from __future__ import annotations

import asyncio

from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.impexp import exports, service
from corral.rpc import calls_impexp as calls


@rpc_handler(calls.export_list)
async def export_list(ctx: NodeContext) -> list[str]:
    """The exports in the node's export directory (one directory each; those
    still being built, ``<name>.new``, are not listed)."""
    return await asyncio.to_thread(exports.listing, ctx.paths)


@rpc_handler(calls.export_info)
async def export_info(ctx: NodeContext, name: str) -> str:
    """The text of ``<export dir>/<name>/config.ini``."""
    return await asyncio.to_thread(exports.info, ctx.paths, name)


@rpc_handler(calls.finalize_export)
async def finalize_export(ctx: NodeContext, instance_name: str, config_text: str) -> None:
    """Write ``config.ini`` into ``<instance>.new/`` and make it the export."""
    await asyncio.to_thread(exports.finalize, ctx.paths, instance_name, config_text)


@rpc_handler(calls.export_remove)
async def export_remove(ctx: NodeContext, name: str) -> None:
    """Remove the export ``name`` (and a leftover ``<name>.new``)."""
    await asyncio.to_thread(exports.remove, ctx.paths, name)


@rpc_handler(calls.export_discard)
async def export_discard(ctx: NodeContext, instance_name: str) -> bool:
    """Stop the imports writing ``<instance>.new`` and remove it (an export
    that will not be finished); whether there was one."""
    exports.check_name(instance_name, "instance name")
    service.abort_writers(ctx.paths.export_dir / f"{instance_name}{exports.NEW}")
    return await asyncio.to_thread(exports.discard_unfinished, ctx.paths, instance_name)
