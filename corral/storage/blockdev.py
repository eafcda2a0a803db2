"""The ``blockdev`` template on the master's side: existing block devices
below /dev/disk/, adopted (never created nor removed), as Ganeti's.

Every node is taken to see the same device (Ganeti counts the template among
the externally mirrored ones); a device is adopted by one disk of an
instance on a node at a time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from corral import constants as C
from corral import errors
from corral import storage_names as N
from corral.objects.disk import Disk
from corral.storage.strategy import (
    RES_DEVICE,
    DiskTemplate,
    Ledger,
    Mirroring,
    Moves,
    Placement,
    Resource,
)


class BlockDevTemplate(DiskTemplate):
    name: ClassVar[str] = N.DT_BLOCK
    doc: ClassVar[str] = "Disks are existing block devices below /dev/disk/, adopted"
    storage_type: ClassVar[str] = N.ST_BLOCK
    mirroring: ClassVar[Mirroring] = Mirroring.EXTERNAL
    moves: ClassVar[Moves] = Moves(failover=True, migrate=True)
    adopts: ClassVar[bool] = True
    holds: ClassVar[frozenset[str]] = frozenset({RES_DEVICE})

    def logical_id(
        self, where: Placement, index: int, spec: Mapping[str, Any], ledger: Ledger
    ) -> list[str]:
        """``[manual, <the adopted device>]``."""
        return [N.BLOCKDEV_DRIVER_MANUAL, os.path.normpath(str(spec["adopt"]))]

    def disk_path(self, logical_id: Sequence[str]) -> str | None:
        return logical_id[1] if len(logical_id) == 2 else None

    def held(self, disk: Disk, primary: str) -> list[Resource]:
        """The device, on the primary node (where it was adopted)."""
        device = self.disk_path(disk.logical_id)
        return [] if device is None else [Resource(RES_DEVICE, device, primary)]

    def taken(self, resource: Resource, owner: str) -> errors.OpPrereqError:
        return errors.OpPrereqError(
            f"Device {resource.value} is already adopted by instance {owner}", C.ECODE_NOTUNIQUE
        )
