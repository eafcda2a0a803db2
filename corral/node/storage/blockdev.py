"""The ``blockdev`` template on a node: existing block devices, adopted.

As Ganeti's PersistentBlockDevice: the device is named below
``/dev/disk/`` (its persistent names), must be a block device under
``/dev/``, and is never created nor removed.  The name is a production
path, resolved below the node's root like every other (a root of ``/`` is
Ganeti's layout; a test root holds links to loop devices there).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from corral import errors
from corral import storage_names as N
from corral.disk_description import DiskDescription
from corral.node.storage.base import NodeTemplate, refuse


def device_path(local: Path, name: str) -> Path:
    """The device ``name`` resolves to, checked (OpExecError when refused)."""
    if not os.path.exists(local):
        raise errors.OpExecError(f"Missing block device {name}: it does not exist")
    real = Path(os.path.realpath(local))
    if not real.is_relative_to("/dev"):
        raise errors.OpExecError(f"Device {name} resolves to {real}, which lies outside /dev")
    try:
        mode = real.stat().st_mode
    except OSError as err:
        raise errors.OpExecError(f"Cannot use device {name}: {err.strerror}") from None
    if not stat.S_ISBLK(mode):
        raise errors.OpExecError(f"Device {name} ({real}) is not a block device")
    return real


class BlockDevTemplate(NodeTemplate):
    """``blockdev``: logical_id ``[manual, /dev/disk/...]``."""

    NAME = N.DT_BLOCK
    STORAGE_TYPE = N.ST_BLOCK

    def attach(self, disk: DiskDescription) -> Path:
        return device_path(self.paths.from_wire(self._name(disk)), self._name(disk))

    def _name(self, disk: DiskDescription) -> str:
        """The device's name below /dev/disk/ (its shape checked, not the device)."""
        logical_id = disk.logical_id
        if len(logical_id) != 2 or logical_id[0] != N.BLOCKDEV_DRIVER_MANUAL:
            raise errors.OpExecError(
                f"Invalid logical_id {list(logical_id)!r} for a {self.NAME} disk:"
                f" expected [{N.BLOCKDEV_DRIVER_MANUAL}, device]"
            )
        name = logical_id[1]
        if not name.startswith(N.ADOPTABLE_BLOCKDEV_ROOT) or os.path.normpath(name) != name:
            raise errors.OpExecError(
                f"Device {name} lies outside {N.ADOPTABLE_BLOCKDEV_ROOT} and cannot be adopted"
            )
        return name

    def unit_problem(self, key: str | None) -> str | None:
        """Adopted devices are named below the node's /dev/disk/."""
        return None if os.path.isdir("/dev") else "the node has no /dev"

    def create(self, disk: DiskDescription) -> None:
        """Adoption creates nothing: the device must exist and hold the size."""
        problem = self.verify(disk)
        if problem is not None:
            raise errors.OpExecError(f"Cannot adopt: {problem}")

    def remove(self, disk: DiskDescription) -> None:
        """Adopted devices stay (as Ganeti: removing the instance releases them)."""
        self._name(disk)

    def grow(self, disk: DiskDescription, new_size: int) -> None:
        raise refuse(self.NAME, "grow")

    def rename(self, disk: DiskDescription, new_logical_id: tuple[str, ...]) -> None:
        if tuple(new_logical_id) != disk.logical_id:
            raise refuse(self.NAME, "be renamed")
