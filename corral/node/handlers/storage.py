"""Calls that report what the node's storage holds, for cluster verification."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.storage.dirs import storage_path

# An answer names at most this many files (a flooded directory stays answerable).
MAX_FILES = 10_000


def _files(top: Path) -> list[Path]:
    """Files in ``top`` and in its subdirectories (where disks sit), not deeper."""
    out: list[Path] = []
    try:
        entries = sorted(os.scandir(top), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return out
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            try:
                out += sorted(Path(e.path) for e in os.scandir(entry.path) if not e.is_dir())
            except OSError:
                continue
        else:
            out.append(Path(entry.path))
        if len(out) >= MAX_FILES:
            break
    return out[:MAX_FILES]


@rpc_handler("file_storage_list")
async def file_storage_list(ctx: NodeContext, storage_dir: str) -> list[str]:
    """The production paths of the files in ``storage_dir`` and its subdirectories."""
    top = storage_path(ctx.paths, storage_dir, strictly=False)
    files = await asyncio.to_thread(_files, top)
    return [ctx.paths.to_wire(path) for path in files]
