"""The file-based templates on the master's side: ``file`` (sparse files in
the primary node's file storage directory) and ``sharedfile`` (the same in
the directory every node sees).

A disk is ``[driver, <dir>/<instance>/<unique>.<template>.disk<index>]``, as
Ganeti's: one directory per instance, unique file names.  The path is what
the disk holds alone: on its node for ``file``, in the whole cluster for
``sharedfile``.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from corral import storage_names as N
from corral.objects.disk import Disk
from corral.storage.strategy import (
    RES_PATH,
    ClusterDirs,
    DiskTemplate,
    Ledger,
    Mirroring,
    Moves,
    Placement,
    Resource,
    UnitSetting,
)


class FileBasedTemplate(DiskTemplate):
    """Disks are files in one of the cluster's storage directories."""

    growable: ClassVar[bool] = True
    file_based: ClassVar[bool] = True
    unit_setting: ClassVar[UnitSetting | None] = "file_storage_dir"
    holds: ClassVar[frozenset[str]] = frozenset({RES_PATH})

    def directory(self, dirs: ClusterDirs) -> str:
        """The cluster directory this template's disks live in."""
        unit = self.capacity_unit(dirs)
        assert unit is not None  # every file-based template names its directory
        return unit.key

    def logical_id(
        self, where: Placement, index: int, spec: Mapping[str, Any], ledger: Ledger
    ) -> list[str]:
        driver = spec.get("driver") or N.FILE_DRIVERS[0]
        unique = uuidlib.uuid4()
        directory = self.directory(where.dirs)
        return [driver, f"{directory}/{where.instance}/{unique}.{self.name}.disk{index}"]

    def disk_path(self, logical_id: Sequence[str]) -> str | None:
        return logical_id[1] if len(logical_id) == 2 else None

    def held(self, disk: Disk, primary: str) -> list[Resource]:
        path = self.disk_path(disk.logical_id)
        if path is None:
            return []
        node = None if self.mirroring is Mirroring.EXTERNAL else disk.holders(primary)[0]
        return [Resource(RES_PATH, path, node)]

    def reserve(self, disk: Disk, primary: str, ledger: Ledger) -> None:
        """Nothing to reserve: a new path holds a fresh uuid, which no other
        disk's can (checking would scan every instance of the cluster)."""

    def renamed(self, disk: Disk, new_name: str) -> list[str] | None:
        """The same file in ``<dir>/<new_name>/``."""
        path = self.disk_path(disk.logical_id)
        if path is None:
            return None
        directory, filename = path.rsplit("/", 1)
        top = directory.rsplit("/", 1)[0]
        return [disk.logical_id[0], f"{top}/{new_name}/{filename}"]

    def detached(self, disk: Disk) -> list[str] | None:
        """The same file in the storage directory itself (Ganeti's
        ``<dir>/<instance>/<file>`` to ``<dir>/<file>``)."""
        path = self.disk_path(disk.logical_id)
        if path is None:
            return None
        directory, filename = path.rsplit("/", 1)
        return [disk.logical_id[0], f"{directory.rsplit('/', 1)[0]}/{filename}"]

    def attached(
        self, disk: Disk, where: Placement, index: int, ledger: Ledger
    ) -> list[str] | None:
        """A new file name in the instance's directory, as for a new disk."""
        if self.disk_path(disk.logical_id) is None:
            return None
        return self.logical_id(where, index, {"driver": disk.logical_id[0]}, ledger)

    def backend_type(self, disk: Disk) -> str:
        return f"file:{disk.logical_id[0]}"


class FileTemplate(FileBasedTemplate):
    name: ClassVar[str] = N.DT_FILE
    doc: ClassVar[str] = "Disks are files in the file storage directory of the primary node"
    storage_type: ClassVar[str] = N.ST_FILE
    mirroring: ClassVar[Mirroring] = Mirroring.NONE
    # Copied to the target by a move, or by a live migration of a hypervisor
    # that copies disks; never failed over (the target has no copy).
    moves: ClassVar[Moves] = Moves(copy=True)


class SharedFileTemplate(FileBasedTemplate):
    name: ClassVar[str] = N.DT_SHARED_FILE
    doc: ClassVar[str] = "Disks are files in the shared file storage directory, seen by every node"
    storage_type: ClassVar[str] = N.ST_SHARED_FILE
    mirroring: ClassVar[Mirroring] = Mirroring.EXTERNAL
    moves: ClassVar[Moves] = Moves(failover=True, migrate=True)
    unit_setting: ClassVar[UnitSetting | None] = "shared_file_storage_dir"
