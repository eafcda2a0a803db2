"""Calls that act on disks, through the template table, and report what the
node's storage holds (for cluster verification).

Every call takes disk descriptions; the template's node-side class resolves
each to a local path and refuses one outside what the template may touch.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from corral import errors
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.storage import extstorage, registry
from corral.node.storage import file as file_storage
from corral.node.storage.copy import copy_disk
from corral.node.storage.dirs import SSCONF_KEYS, template_dirs
from corral.rpc import calls_storage as calls
from corral.rpc.wire import DiskWire, ExtStorageWire

# An answer names at most this many files (a flooded directory stays answerable).
MAX_FILES = 10_000


@rpc_handler(calls.blockdev_create)
async def blockdev_create(ctx: NodeContext, disk: DiskWire) -> None:
    template, desc = registry.resolve(ctx.paths, disk)
    await asyncio.to_thread(template.create, desc)


@rpc_handler(calls.blockdev_remove)
async def blockdev_remove(ctx: NodeContext, disk: DiskWire) -> None:
    """Shut the disk down here (a mirrored disk's exports), then remove it."""
    template, desc = registry.resolve(ctx.paths, disk)
    await template.shutdown(desc)
    await asyncio.to_thread(template.remove, desc)


@rpc_handler(calls.blockdev_grow)
async def blockdev_grow(ctx: NodeContext, disk: DiskWire, new_size: int) -> None:
    if new_size <= 0:
        raise errors.OpExecError(f"Invalid disk size {new_size!r}")
    template, desc = registry.resolve(ctx.paths, disk)
    await asyncio.to_thread(template.grow, desc, new_size)


@rpc_handler(calls.blockdev_rename)
async def blockdev_rename(ctx: NodeContext, devlist: list[tuple[DiskWire, list[str]]]) -> None:
    """Each ``(disk, new logical_id)``; all are checked before any moves."""
    moves = []
    for disk, new_id in devlist:
        template, desc = registry.resolve(ctx.paths, disk)
        target = desc.with_logical_id(new_id)
        template.attach(desc)
        moves.append((template, desc, target.logical_id))
    for template, desc, logical_id in moves:
        await asyncio.to_thread(template.rename, desc, logical_id)


@rpc_handler(calls.blockdev_assemble)
async def blockdev_assemble(ctx: NodeContext, disk: DiskWire) -> str:
    """Assemble a disk that exists (one that is missing is refused); its path."""
    template, desc = registry.resolve(ctx.paths, disk)
    status = await asyncio.to_thread(template.sync_status, desc)
    if not status.present:
        path = ctx.paths.to_wire(template.attach(desc))
        raise errors.OpExecError(f"Disk {desc.iv_name or desc.uuid} does not exist ({path})")
    return ctx.paths.to_wire(await template.assemble(desc))


@rpc_handler(calls.blockdev_shutdown)
async def blockdev_shutdown(ctx: NodeContext, disk: DiskWire) -> None:
    template, desc = registry.resolve(ctx.paths, disk)
    await template.shutdown(desc)


@rpc_handler(calls.blockdev_convert)
async def blockdev_convert(ctx: NodeContext, src: DiskWire, dst: DiskWire) -> None:
    src_template, src_desc = registry.resolve(ctx.paths, src)
    dst_template, dst_desc = registry.resolve(ctx.paths, dst)
    source = await src_template.assemble(src_desc)
    async with dst_template.opened(dst_desc) as target:
        await asyncio.to_thread(copy_disk, source, target)


@rpc_handler(calls.blockdev_getdimensions)
async def blockdev_getdimensions(
    ctx: NodeContext, disks: list[DiskWire]
) -> list[tuple[int, int | None]]:
    """Each disk's ``[size in bytes, spindles]`` (Corral counts no spindles)."""
    out: list[tuple[int, int | None]] = []
    for disk in disks:
        template, desc = registry.resolve(ctx.paths, disk)
        out.append((await asyncio.to_thread(template.size, desc), None))
    return out


def _files(top: Path) -> list[Path]:
    """Files in ``top`` and in its subdirectories (where disks sit), not deeper."""
    out: list[Path] = []
    try:
        entries = sorted(os.scandir(top), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return out
    for entry in entries:
        if entry.name.startswith(file_storage.REMOVING):
            continue  # a removed disk's blocks being freed: no orphan
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


@rpc_handler(calls.file_storage_list)
async def file_storage_list(ctx: NodeContext, disk_template: str) -> list[str]:
    """The production paths of the files in the directories of the file-based
    template ``disk_template`` and their subdirectories."""
    if disk_template not in SSCONF_KEYS:
        raise errors.OpExecError(f"Disk template {disk_template!r} keeps no files")
    files: list[Path] = []
    for top in template_dirs(ctx.paths, disk_template):
        files += await asyncio.to_thread(_files, top)
    return [ctx.paths.to_wire(path) for path in files[:MAX_FILES]]


@rpc_handler(calls.extstorage_diagnose)
async def extstorage_diagnose(ctx: NodeContext) -> list[ExtStorageWire]:
    """The providers of this node's search path, valid or not (with the reason)."""
    return await asyncio.to_thread(extstorage.diagnose, ctx.paths)
