"""Calls about instance exports (backups) kept on the node."""

from __future__ import annotations

from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler


@rpc_handler("export_list")
async def export_list(ctx: NodeContext) -> list[str]:
    """The exports in the node's export directory (one directory each)."""
    directory = ctx.paths.export_dir
    if not directory.is_dir():
        return []
    return sorted(p.name for p in directory.iterdir() if p.is_dir() and not p.name.startswith("."))
