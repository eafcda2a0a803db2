"""Storage units: where a disk template's disks take their space (Ganeti's
``StorageUnit``): a storage type (``names.ST_*``) and its key, for the file
kinds the storage directory (a production path).

The master names the unit of a template (``DiskTemplate.capacity_unit``);
the capacity calls of a node take units, and the node's template for the
storage type answers (:func:`corral.node.storage.registry.capacity`).
"""

from __future__ import annotations

from dataclasses import dataclass

from corral import errors


@dataclass(frozen=True)
class StorageUnit:
    """A storage type and its key (a directory for ``file`` and ``sharedfile``)."""

    storage_type: str
    key: str

    def to_wire(self) -> list[str]:
        """The unit as node calls take it: ``[storage type, key]`` (Ganeti's
        triple without the parameters, which only LVM has)."""
        return [self.storage_type, self.key]

    @classmethod
    def from_wire(cls, data: object) -> StorageUnit:
        """The unit sent as ``data``; OpExecError if it is malformed."""
        if (
            not isinstance(data, list)
            or len(data) != 2
            or not all(isinstance(part, str) and part for part in data)
        ):
            raise errors.OpExecError(f"Invalid storage unit {data!r}: expected [storage type, key]")
        return cls(data[0], data[1])

    def __str__(self) -> str:
        return f"{self.storage_type}:{self.key}"
