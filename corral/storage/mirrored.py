"""The ``mirrored`` template on the master's side: every disk on two nodes.

Each node keeps a copy as a sparse file in its own file storage directory
(the disk's one child, a ``file`` disk at the same path on both nodes).  The
secondary node exports its copy over NBD, TLS under the cluster CA, on the
disk's port; on the primary, a QEMU ``quorum`` node with a vote threshold of
two writes to both copies and acknowledges a write only once both have it
(DRBD's protocol C) — QEMU itself while the guest runs, a
``qemu-storage-daemon`` exporting the quorum as a file for the OS scripts
while it is stopped.  The nodes' side is :mod:`corral.node.storage.mirrored`.

A disk is ``[primary uuid, secondary uuid, port]`` (Ganeti's drbd logical_id
without its minors and secret: a TLS link needs neither).  What it holds alone
is its port, in the whole cluster (the pool kvm's VNC displays take from, as
Ganeti's), and its file's path on each of its nodes.

Ganeti's tools know only Ganeti's template names; they ask for this one by
``drbd`` (:data:`corral.storage_names.GANETI_ALIASES`).
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from corral import storage_names as N
from corral.objects.disk import Disk
from corral.storage.ports import allocate_port
from corral.storage.strategy import (
    RES_PATH,
    RES_PORT,
    DiskTemplate,
    Ledger,
    Mirroring,
    Moves,
    Placement,
    Resource,
    UnitSetting,
)

# The positions in a mirrored disk's logical_id.
LID_PRIMARY, LID_SECONDARY, LID_PORT = range(3)
# What the data child's file name ends in (its template, as file disks').
_CHILD_SUFFIX = "mirrored.disk"


class MirroredTemplate(DiskTemplate):
    """Disks on the primary and the secondary node, written to both at once."""

    name: ClassVar[str] = N.DT_MIRRORED
    doc: ClassVar[str] = (
        "Disks are files on the primary and the secondary node; a write is acknowledged"
        " once both have it (QEMU's quorum over NBD with TLS)"
    )
    storage_type: ClassVar[str] = N.ST_FILE
    mirroring: ClassVar[Mirroring] = Mirroring.INTERNAL
    # A failover or a live migration to the secondary (the roles swap).
    moves: ClassVar[Moves] = Moves(failover=True, migrate=True)
    secondaries: ClassVar[int] = 1
    # Grown while stopped only: a running guest's quorum, exports and resync
    # jobs all hold the copies' sizes from their start.
    growable: ClassVar[bool] = True
    grows_running: ClassVar[bool] = False
    unit_setting: ClassVar[UnitSetting | None] = "file_storage_dir"
    holds: ClassVar[frozenset[str]] = frozenset({RES_PORT, RES_PATH})

    def logical_id(
        self, where: Placement, index: int, spec: Mapping[str, Any], ledger: Ledger
    ) -> list[str]:
        (secondary,) = where.secondaries
        return [where.primary, secondary, str(allocate_port(ledger))]

    def children(self, where: Placement, index: int, spec: Mapping[str, Any]) -> list[Disk]:
        """The data file, at the same path on both nodes."""
        directory = where.dirs.file_storage_dir
        path = f"{directory}/{where.instance}/{uuidlib.uuid4()}.{_CHILD_SUFFIX}{index}"
        return [
            Disk(
                size=int(spec["size"]),
                mode=str(spec.get("mode") or "rw"),
                dev_type=N.DT_FILE,
                logical_id=[N.FILE_DRIVERS[0], path],
                nodes=self.disk_nodes(where.primary, where.secondaries),
            )
        ]

    def nodes_changed(self, disk: Disk) -> None:
        """The logical_id and the data child name the nodes as ``nodes`` does,
        the primary first."""
        disk.logical_id = [*disk.nodes, *disk.logical_id[LID_PORT:]]
        for child in disk.children:
            child.nodes = list(disk.nodes)

    def reserve(self, disk: Disk, primary: str, ledger: Ledger) -> None:
        """Nothing more to reserve: the port was allocated (and so reserved)
        by :meth:`logical_id`, and the file's name holds a fresh uuid."""

    def held(self, disk: Disk, primary: str) -> list[Resource]:
        held: list[Resource] = []
        if len(disk.logical_id) > LID_PORT:
            held.append(Resource(RES_PORT, int(disk.logical_id[LID_PORT])))
        for child in disk.children:
            path = self.child_path(child.logical_id)
            if path is not None:
                held += [Resource(RES_PATH, path, node) for node in disk.nodes]
        return held

    @staticmethod
    def child_path(logical_id: Sequence[str]) -> str | None:
        """The file a data child's logical_id names."""
        return logical_id[1] if len(logical_id) == 2 else None

    def disk_path(self, logical_id: Sequence[str]) -> str | None:
        """None: the disk's files are its child's (:meth:`child_path`)."""
        return None

    def backend_type(self, disk: Disk) -> str:
        # The OS scripts get a file (the quorum exported by FUSE), as a file disk's.
        return f"file:{N.FILE_DRIVERS[0]}"


def port_of(disk: Disk) -> int:
    """The port of a mirrored disk's link."""
    return int(disk.logical_id[LID_PORT])
