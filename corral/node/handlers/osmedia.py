"""Calls for design-os's media: OS images, personalization packages and
helper VMs.

The work blocks (disk and network I/O) and runs in a worker thread; a write's
progress is kept here, by the token the master gave, while it runs.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from corral.node import helper_vm
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.osmedia import image as osimage
from corral.node.osmedia import package
from corral.node.storage import registry
from corral.osdef.media import PackageSource, check_image
from corral.rpc import calls_osmedia as calls
from corral.rpc.calls_osmedia import HelperStatus, ImageProbe, ImageWritten, PackageWire
from corral.rpc.wire import DiskWire, InstanceWire

# Token → progress of the image writes running on this node.
_WRITES: dict[str, osimage.Progress] = {}


def _disk_bytes(path: Path) -> int:
    with open(path, "rb") as disk:
        return disk.seek(0, os.SEEK_END)


@rpc_handler(calls.os_image_probe)
async def os_image_probe(ctx: NodeContext, image: str) -> ImageProbe:
    """The image's format and size, as this node reads it."""
    check_image(image)
    info = await asyncio.to_thread(osimage.probe, image)
    return {"format": info.format, "size": info.size}


@rpc_handler(calls.blockdev_image)
async def blockdev_image(ctx: NodeContext, disk: DiskWire, image: str, token: str) -> ImageWritten:
    """Write ``image`` onto the disk (checked to fit first)."""
    check_image(image)
    async with registry.local_path(ctx.paths, disk) as path:
        size = await asyncio.to_thread(_disk_bytes, path)
        progress = _WRITES[token] = osimage.Progress()
        try:
            await asyncio.to_thread(
                osimage.write, image, path, size, progress, ctx.paths.os_media_dir
            )
        finally:
            del _WRITES[token]
    return {"size": progress.total, "written": progress.written}


@rpc_handler(calls.blockdev_image_progress)
async def blockdev_image_progress(ctx: NodeContext, token: str) -> list[int] | None:
    """How far the write named ``token`` is."""
    progress = _WRITES.get(token)
    return None if progress is None else [progress.done, progress.total]


@rpc_handler(calls.os_package_probe)
async def os_package_probe(ctx: NodeContext, source: PackageWire) -> None:
    """Refuse a package that cannot be fetched or is not gzip-compressed."""
    await asyncio.to_thread(package.probe, PackageSource.from_wire(source))


@rpc_handler(calls.instance_os_package)
async def instance_os_package(
    ctx: NodeContext, disk: DiskWire, source: PackageWire
) -> dict[str, int]:
    """Unpack the package over the disk's filesystem."""
    async with registry.local_path(ctx.paths, disk) as path:
        return await asyncio.to_thread(
            package.overlay, PackageSource.from_wire(source), path, ctx.paths.os_media_dir
        )


@rpc_handler(calls.helper_vm_start)
async def helper_vm_start(
    ctx: NodeContext, inst: InstanceWire, image: str, package: PackageWire | None, reinstall: bool
) -> None:
    """Start the instance's helper VM (:mod:`corral.node.helper_vm`)."""
    pkg = PackageSource.from_wire(package) if package is not None else None
    await helper_vm.start(ctx, dict(inst), image, pkg, reinstall)


@rpc_handler(calls.helper_vm_status)
async def helper_vm_status(ctx: NodeContext, name: str) -> HelperStatus:
    """Whether the helper VM runs; its new progress lines."""
    found = await helper_vm.status(ctx, name)
    return {"running": bool(found["running"]), "lines": list(found["lines"])}


@rpc_handler(calls.helper_vm_stop)
async def helper_vm_stop(ctx: NodeContext, name: str) -> None:
    """Kill the helper VM, withdraw its data, remove its files."""
    await helper_vm.stop(ctx, name)
