"""The ``diskless`` template: instances without disks (as Ganeti, trivially
externally mirrored: nothing keeps them on a node)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from corral import errors
from corral import storage_names as N
from corral.storage.strategy import DiskTemplate, Ledger, Mirroring, Moves, Placement


class DisklessTemplate(DiskTemplate):
    name: ClassVar[str] = N.DT_DISKLESS
    doc: ClassVar[str] = "Instances without disks"
    storage_type: ClassVar[str] = N.ST_DISKLESS
    mirroring: ClassVar[Mirroring] = Mirroring.EXTERNAL
    moves: ClassVar[Moves] = Moves(failover=True, migrate=True)
    has_disks: ClassVar[bool] = False

    def logical_id(
        self, where: Placement, index: int, spec: Mapping[str, Any], ledger: Ledger
    ) -> list[str]:
        raise errors.ProgrammerError("A diskless instance has no disks")
