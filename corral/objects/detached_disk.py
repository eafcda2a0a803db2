"""A disk detached from its instance (Ganeti 3.0's ``DDM_DETACH``): kept in
the configuration, its data kept on its node(s), until attached again.

Corral keeps an instance's disks inside the instance; a detached disk has no
instance, so it is a row of its own in the ``disks`` table.  The row's name is
the disk's uuid: disk names are optional and, as in Ganeti, need not be
unique across the cluster (an ambiguous name is refused when attaching).
"""

from __future__ import annotations

from typing import ClassVar

from corral.objects.base import ConfigObject
from corral.objects.disk import Disk


class DetachedDisk(ConfigObject):
    TABLE: ClassVar[str] = "disks"

    disk: Disk

    @classmethod
    def of(cls, disk: Disk) -> DetachedDisk:
        """The row keeping ``disk`` (the same uuid)."""
        return cls(uuid=disk.uuid, name=disk.uuid, disk=disk)
