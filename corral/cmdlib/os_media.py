"""The master's side of design-os's media (:mod:`corral.osdef.media`): an OS
image written onto disk 0 and a personalization package unpacked over it.

Both are checked from the primary node before anything is created or
changed (the image found, of a known format, fitting on disk 0; the package
reachable with its credentials and gzip-compressed), and checked again by
the node when it writes.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors
from corral.objects import Instance, Node
from corral.osdef import media
from corral.rpc.calls_osmedia import (
    blockdev_image,
    blockdev_image_progress,
    instance_os_package,
    os_image_probe,
    os_package_probe,
)

if TYPE_CHECKING:
    from corral.cmdlib.base import LogicalUnit

MIB = 1024 * 1024
# Seconds between two progress lines of an image write.
PROGRESS_EVERY = 2.0


def image_of(osparams: Mapping[str, Any]) -> str | None:
    """The OS image the (public) parameters name, checked as Ganeti's CheckOSImage."""
    image = osparams.get(media.OS_IMAGE)
    return media.check_image(None if image is None else str(image))


async def check_image(lu: LogicalUnit[Any], node: Node, image: str, disk_mib: int) -> None:
    """OpPrereqError unless ``node`` can read ``image`` and it fits on a disk
    of ``disk_mib`` MiB."""
    info = await lu.master.rpc.run(
        node,
        os_image_probe(image),
        f"Cannot use the OS image on node {node.name}",
        ecode=C.ECODE_INVAL,
    )
    if info["size"] > disk_mib * MIB:
        raise errors.OpPrereqError(
            f"Image size is bigger than device size: {image} needs"
            f" {-(-info['size'] // MIB)} MiB and disk 0 has {disk_mib} MiB;"
            " give a larger disk 0",
            C.ECODE_INVAL,
        )


async def check_package(lu: LogicalUnit[Any], node: Node, source: media.PackageSource) -> None:
    """OpPrereqError unless ``node`` can fetch the package and it is gzip-compressed."""
    await lu.master.rpc.run(
        node,
        os_package_probe(source.to_wire()),
        f"Cannot use the personalization package on node {node.name}",
        ecode=C.ECODE_INVAL,
    )


async def write_image(lu: LogicalUnit[Any], inst: Instance, node: Node, image: str) -> None:
    """Write ``image`` onto the instance's disk 0, its progress in the job log."""
    lu.feedback(f"Imaging disk '0' for instance '{inst.name}' on node '{node.name}'")
    token = secrets.token_hex(8)
    disk = inst.disks[0].description().to_wire()
    call = lu.master.rpc.run(
        node,
        blockdev_image(disk, image, token),
        f"Could not image disk '0' for instance '{inst.name}' on node '{node.name}'",
    )
    task = asyncio.ensure_future(call)
    try:
        while not (await asyncio.wait([task], timeout=PROGRESS_EVERY))[0]:
            status = await lu.master.rpc.result(node, blockdev_image_progress(token))
            if status.value:
                done, total = status.value
                share = 100 * done // total if total else 100
                lu.feedback(f" - disk/0: {done // MIB} of {-(-total // MIB)} MiB ({share}%)")
        written = task.result()
    finally:
        task.cancel()
    lu.feedback(
        f" - disk/0: image of {-(-written['size'] // MIB)} MiB written"
        f" ({-(-written['written'] // MIB)} MiB of data, the rest left as holes)"
    )


async def unpack_package(
    lu: LogicalUnit[Any], inst: Instance, node: Node, source: media.PackageSource
) -> None:
    """Unpack the personalization package over the instance's disk 0."""
    lu.feedback(f"* unpacking the personalization package {source.url} over disk 0...")
    disk = inst.disks[0].description().to_wire()
    counts = await lu.master.rpc.run(
        node,
        instance_os_package(disk, source.to_wire()),
        f"Could not unpack the personalization package for instance '{inst.name}'"
        f" on node '{node.name}'",
    )
    lu.feedback(f" - {counts['members']} entries, {counts['bytes']} bytes of files unpacked")
