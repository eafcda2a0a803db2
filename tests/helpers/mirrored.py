"""A disk template with a copy on a secondary node, as issue 26's will be: a
test double (not a template of Corral's) showing the seams it needs exist,
and standing in for one in rules about internally mirrored instances."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

import pytest

from corral.objects import Disk
from corral.services import ports
from corral.storage import templates
from corral.storage.strategy import (
    DiskTemplate,
    Ledger,
    Mirroring,
    Moves,
    Placement,
    Resource,
)


class MirroredDouble(DiskTemplate):
    """A template with a copy on a secondary node, as issue 26's will be: the
    seams it needs exist (a test double, not a template of Corral's)."""

    name: ClassVar[str] = "mirrored-test"
    doc: ClassVar[str] = "test"
    storage_type: ClassVar[str] = "file"
    mirroring: ClassVar[Mirroring] = Mirroring.INTERNAL
    moves: ClassVar[Moves] = Moves(failover=True, migrate=True)
    secondaries: ClassVar[int] = 1
    holds: ClassVar[frozenset[str]] = frozenset({templates.RES_PORT})

    def logical_id(
        self, where: Placement, index: int, spec: Mapping[str, Any], ledger: Ledger
    ) -> list[str]:
        """As Ganeti's drbd: the nodes and the port of the link between them."""
        port = ports.allocate_port(ledger)
        return [where.primary, *where.secondaries, str(port)]

    def held(self, disk: Disk, primary: str) -> list[Resource]:
        return [Resource(templates.RES_PORT, int(disk.logical_id[-1]))]

    def children(self, where: Placement, index: int, spec: Mapping[str, Any]) -> list[Disk]:
        return [
            Disk(
                size=int(spec["size"]),
                dev_type="file",
                logical_id=["loop", f"/d/{node}"],
                nodes=[node],
            )
            for node in (where.primary, *where.secondaries)
        ]


@contextmanager
def mirrored_in_table() -> Iterator[str]:
    """The double in the table of templates, for as long as the block runs;
    its name."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(templates.DISK_TEMPLATES, MirroredDouble.name, MirroredDouble())
        yield MirroredDouble.name
