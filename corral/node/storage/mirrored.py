"""The ``mirrored`` template on a node: its copy of each disk, and the link.

The copy is the disk's data child, a ``file`` disk (a sparse file in this
node's file storage directory, at the same path on both nodes).  Which copy
this node holds follows from the node's own name among the disk's
``addresses`` (what the master adds to a description it sends to assemble):

- on the secondary, assembling the disk exports the copy over NBD with TLS
  (:mod:`corral.node.storage.qsd`) on the node's secondary IP and the disk's
  port; shutting it down ends the export;
- on the primary, the guest's QEMU writes through a quorum over its copy and
  that export (:func:`link`); the OS scripts and image writes, while the
  guest is stopped, through the same quorum exported as a file by FUSE
  (:meth:`MirroredTemplate.opened`).

The master side is :mod:`corral.storage.mirrored`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

from corral import errors
from corral import storage_names as N
from corral.disk_description import DiskDescription
from corral.node.qemu_tls import node_identity
from corral.node.storage import qsd
from corral.node.storage.base import NodeTemplate, SyncStatus, refuse
from corral.node.storage.file import FileTemplate
from corral.paths import Paths

ROLE_NBD, ROLE_FUSE = "nbd", "fuse"
FUSE_DEVICE = "/dev/fuse"
MIB = 1024 * 1024


@dataclass(frozen=True)
class Link:
    """What the primary needs to write to the secondary's copy."""

    export: str  # the export's name: the disk's uuid
    host: str  # the secondary's secondary IP
    port: int
    peer_name: str  # the name its certificate carries (TLS checks it)
    # The secondary's copy is behind (the master says so): the primary writes
    # its own copy alone, a stand-in in the quorum, until a resync.
    alone: bool = False


def _port(disk: DiskDescription) -> int:
    if len(disk.logical_id) != 3 or not disk.logical_id[2].isdigit():
        raise errors.OpExecError(
            f"Invalid logical_id {list(disk.logical_id)!r} for a mirrored disk:"
            " expected [primary, secondary, port]"
        )
    return int(disk.logical_id[2])


def role(paths: Paths, disk: DiskDescription) -> int:
    """This node's position among the disk's nodes (0: the primary)."""
    if len(disk.addresses) != 2:
        raise errors.OpExecError(
            f"The master sent mirrored disk {disk.iv_name or disk.uuid} without its two"
            " nodes' addresses"
        )
    me = node_identity(paths)
    names = [name for name, _ in disk.addresses]
    if me not in names:
        raise errors.OpExecError(
            f"This node ({me}) holds no copy of mirrored disk {disk.iv_name or disk.uuid}"
            f" (its nodes: {', '.join(names)})"
        )
    return names.index(me)


def link(disk: DiskDescription) -> Link:
    """How the primary reaches the secondary's copy of ``disk``."""
    peer_name, host = disk.addresses[1]
    alone = len(disk.nodes) == 2 and disk.nodes[1] in disk.outdated
    return Link(export=disk.uuid, host=host, port=_port(disk), peer_name=peer_name, alone=alone)


def migrating_in(disk: DiskDescription) -> DiskDescription:
    """``disk`` as the target of a live migration (its secondary) starts the
    guest: the roles swapped, and the source's copy not linked yet (a
    stand-in takes its place).  The guest runs there only once the source's
    guest is gone and its node exports that copy, linked then
    (:func:`corral.node.hypervisor.kvm.mirror_resync.join`)."""
    if len(disk.nodes) != 2 or len(disk.addresses) != 2:
        raise errors.OpExecError(
            f"The master sent mirrored disk {disk.iv_name or disk.uuid} without its two nodes"
        )
    source, target = disk.nodes
    primary, secondary, port = disk.logical_id
    return replace(
        disk,
        nodes=(target, source),
        addresses=(disk.addresses[1], disk.addresses[0]),
        logical_id=(secondary, primary, port),
        outdated=(source,),
    )


def alone_size(size: int, peer: Link) -> int | None:
    """The stand-in's size in bytes (of a disk of ``size`` MiB) when the
    secondary's copy is behind (see :func:`qsd.quorum_blockdev`)."""
    return size * MIB if peer.alone else None


class MirroredTemplate(NodeTemplate):
    """``mirrored``: this node's copy, exported by the secondary, written
    through a quorum by the primary."""

    NAME = N.DT_MIRRORED
    STORAGE_TYPE = N.ST_FILE
    MIRRORED = True

    def _data(self, disk: DiskDescription) -> tuple[FileTemplate, DiskDescription]:
        if len(disk.children) != 1 or disk.children[0].template != FileTemplate.NAME:
            raise errors.OpExecError(
                f"Mirrored disk {disk.iv_name or disk.uuid} needs one file child (its data)"
            )
        return FileTemplate(self.paths), disk.children[0]

    def attach(self, disk: DiskDescription) -> Path:
        """This node's copy."""
        _port(disk)
        files, data = self._data(disk)
        return files.attach(data)

    def create(self, disk: DiskDescription) -> None:
        files, data = self._data(disk)
        files.create(data)

    def remove(self, disk: DiskDescription) -> None:
        """The copy goes (noded shut its exports down first)."""
        files, data = self._data(disk)
        files.remove(data)

    def grow(self, disk: DiskDescription, new_size: int) -> None:
        """This node's copy grows (the master grows every copy)."""
        files, data = self._data(disk)
        files.grow(data, new_size)

    def rename(self, disk: DiskDescription, new_logical_id: tuple[str, ...]) -> None:
        raise refuse(self.NAME, "be renamed yet")

    def size(self, disk: DiskDescription) -> int:
        files, data = self._data(disk)
        return files.size(data)

    async def assemble(self, disk: DiskDescription) -> Path:
        """On the secondary, export the copy to the primary; on the primary,
        nothing (the guest or :meth:`opened` writes through the quorum)."""
        path = self.attach(disk)
        if role(self.paths, disk) == 1:
            # A copy left behind when its disk grew (its node did not answer)
            # grows now: it is outdated, and its resync fills it whole.
            if path.stat().st_size < disk.size * MIB:
                await qsd.stop(self.paths, disk.uuid, ROLE_NBD)  # at the old size
                self.grow(disk, disk.size)
            _, host = disk.addresses[1]
            await qsd.start_nbd_export(self.paths, disk.uuid, path, host, _port(disk))
        return path

    async def shutdown(self, disk: DiskDescription) -> None:
        """End this node's exports of the disk."""
        for kind in (ROLE_NBD, ROLE_FUSE):
            await qsd.stop(self.paths, disk.uuid, kind)

    @contextlib.asynccontextmanager
    async def opened(self, disk: DiskDescription) -> AsyncIterator[Path]:
        """On the primary, a file whose writes reach both copies: the quorum
        exported by FUSE while the block runs."""
        if role(self.paths, disk) != 0:
            raise errors.OpExecError(
                f"Mirrored disk {disk.iv_name or disk.uuid} is written on its primary node only"
            )
        image, peer = self.attach(disk), link(disk)
        mountpoint = qsd.mirror_dir(self.paths) / f"{disk.uuid}.fuse"
        await qsd.start_fuse_export(
            self.paths,
            disk.uuid,
            image,
            peer.host,
            peer.port,
            mountpoint,
            peer.peer_name,
            alone_size(disk.size, peer),
        )
        try:
            yield mountpoint
        finally:
            await qsd.stop(self.paths, disk.uuid, ROLE_FUSE)

    def unit_problem(self, key: str | None) -> str | None:
        """The copies' file storage directory, and what links them: QEMU's
        storage daemon, and FUSE for the OS scripts' writes."""
        problem = FileTemplate(self.paths).unit_problem(key)
        if problem is not None:
            return problem
        if not os.access(qsd.QSD, os.X_OK):
            return f"{qsd.QSD} is missing (Debian's package qemu-system-common)"
        if not os.path.exists(FUSE_DEVICE):
            return f"{FUSE_DEVICE} is missing (the kernel's fuse module)"
        return None

    def sync_status(self, disk: DiskDescription) -> SyncStatus:
        """This node's copy as a file disk's; degraded states come with the
        mirror's state machine."""
        files, data = self._data(disk)
        return files.sync_status(data)
