"""The node side of the disk template table: template name → its class, and
storage type → the class answering for its storage units.

The names are the master's table's (:mod:`corral.storage.templates`); a
test checks both tables hold the same templates.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from corral import errors
from corral import storage_names as N
from corral.disk_description import DiskDescription
from corral.node.storage.base import Capacity, NodeTemplate, refuse
from corral.node.storage.blockdev import BlockDevTemplate
from corral.node.storage.file import FileTemplate, SharedFileTemplate
from corral.node.storage.mirrored import MirroredTemplate
from corral.paths import Paths
from corral.storage.units import StorageUnit


class DisklessTemplate(NodeTemplate):
    """``diskless``: there is never a disk to act on."""

    NAME = N.DT_DISKLESS
    STORAGE_TYPE = N.ST_DISKLESS

    def attach(self, disk: DiskDescription) -> Path:
        raise refuse(N.DT_DISKLESS, "exist")

    def create(self, disk: DiskDescription) -> None:
        raise refuse(N.DT_DISKLESS, "exist")

    def remove(self, disk: DiskDescription) -> None:
        raise refuse(N.DT_DISKLESS, "exist")

    def grow(self, disk: DiskDescription, new_size: int) -> None:
        raise refuse(N.DT_DISKLESS, "exist")

    def rename(self, disk: DiskDescription, new_logical_id: tuple[str, ...]) -> None:
        raise refuse(N.DT_DISKLESS, "exist")


NODE_TEMPLATES: Mapping[str, type[NodeTemplate]] = {
    N.DT_DISKLESS: DisklessTemplate,
    N.DT_FILE: FileTemplate,
    N.DT_SHARED_FILE: SharedFileTemplate,
    N.DT_BLOCK: BlockDevTemplate,
    N.DT_MIRRORED: MirroredTemplate,
}
# Storage type → the template answering for its units (a mirrored disk's
# copies are files: the file template answers for their unit).
UNIT_TEMPLATES: Mapping[str, type[NodeTemplate]] = {
    cls.STORAGE_TYPE: cls for cls in NODE_TEMPLATES.values() if cls is not MirroredTemplate
}


def template_of(paths: Paths, disk: DiskDescription) -> NodeTemplate:
    """The node-side template serving ``disk``; OpExecError for a template this
    node does not serve."""
    cls = NODE_TEMPLATES.get(disk.template)
    if cls is None:
        raise errors.OpExecError(f"Disk template {disk.template!r} is not served by this node")
    return cls(paths)


def resolve(paths: Paths, data: object) -> tuple[NodeTemplate, DiskDescription]:
    """The template and the checked description of a disk sent as ``data``."""
    disk = DiskDescription.from_wire(data)
    return template_of(paths, disk), disk


def plain_path(paths: Paths, data: object) -> Path:
    """The local path of the disk sent as ``data``, for callers that write it
    directly; a disk whose writes must go through its mirror is refused."""
    template, disk = resolve(paths, data)
    if template.MIRRORED:
        raise errors.OpExecError(
            f"Disks of the {template.NAME} template cannot be written by this operation yet"
        )
    return template.attach(disk)


@contextlib.asynccontextmanager
async def local_path(paths: Paths, data: object) -> AsyncIterator[Path]:
    """The local path of the disk sent as ``data`` for this node's own writes
    (OS scripts, images) while the block runs."""
    template, disk = resolve(paths, data)
    async with template.opened(disk) as path:
        yield path


def unit_template(paths: Paths, unit: StorageUnit) -> NodeTemplate:
    """The template answering for ``unit``; OpExecError for a storage type this
    node does not serve."""
    cls = UNIT_TEMPLATES.get(unit.storage_type)
    if cls is None:
        raise errors.OpExecError(f"Storage type {unit.storage_type!r} is not served by this node")
    return cls(paths)


def capacity(paths: Paths, data: object) -> Capacity:
    """Size and free space of the storage unit sent as ``data`` (blocks: it may
    wait for removed disks' space to come back)."""
    unit = StorageUnit.from_wire(data)
    return unit_template(paths, unit).capacity(unit.key)
