"""A disk of an instance, as Ganeti's disk tree: the disk, the nodes that hold
it and the devices it is made of.

``nodes`` are the node uuids holding the disk, the primary first: its one
node for ``file``, none for the externally mirrored templates (``sharedfile``,
``blockdev``: every node sees the same disk, as Ganeti leaves them), the
primary and its secondaries for an internally mirrored one.  ``children`` are
the devices the disk is built on (a mirrored disk's per-node data volumes);
the templates Corral has today have none.  The template of ``dev_type``
(:mod:`corral.storage.templates`) decides both when it makes the disk.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from corral.disk_description import DiskDescription
from corral.objects.base import new_uuid


class Disk(BaseModel):
    """One disk; ``logical_id`` has its template's shape: ``[driver, path]`` for
    the file-based templates, ``[manual, device]`` for blockdev."""

    model_config = ConfigDict(extra="forbid")

    uuid: str = Field(default_factory=new_uuid)
    name: str | None = None
    size: int
    mode: str = "rw"
    dev_type: str
    logical_id: list[str] = Field(default_factory=list)
    iv_name: str = ""
    spindles: int | None = None
    serial_no: int = 1
    nodes: list[str] = Field(default_factory=list)
    children: list[Disk] = Field(default_factory=list)
    # Corral's own, of a mirrored disk: the nodes whose copy missed writes
    # (DRBD's "outdated": never to be taken for a current copy), and the sync
    # generation, one more each time the set of current copies changes.
    outdated: list[str] = Field(default_factory=list)
    generation: int = 0

    def holders(self, primary: str) -> list[str]:
        """The nodes that hold this disk: its own, or (every node seeing it)
        the instance's primary node ``primary`` (Ganeti's ``GetNodes``)."""
        return list(self.nodes) or [primary]

    def description(self, addresses: tuple[tuple[str, str], ...] = ()) -> DiskDescription:
        """The disk as node RPCs take it, with its children, the nodes whose
        copy is behind (and its nodes' ``addresses`` where they must reach
        each other)."""
        return DiskDescription(
            self.dev_type,
            tuple(self.logical_id),
            self.size,
            self.uuid,
            self.iv_name,
            self.name,
            self.mode,
            tuple(self.nodes),
            tuple(child.description() for child in self.children),
            addresses,
            tuple(self.outdated),
        )
