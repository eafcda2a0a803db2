"""A disk as node RPCs name it: a small typed description, never a bare path.

The master builds it from the configuration's disk (``Disk.description()``);
noded rebuilds it with :meth:`DiskDescription.from_wire`, which refuses any
malformed description, and resolves the disk's local path itself through the
template's node-side class (:mod:`corral.node.storage.registry`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from corral import errors

if TYPE_CHECKING:
    from corral.rpc.wire import DiskWire

# The JSON keys of a description on the wire, with their types.
_FIELDS: dict[str, type | tuple[type, ...]] = {
    "template": str,
    "logical_id": list,
    "size": int,
    "uuid": str,
    "iv_name": str,
    "name": (str, type(None)),
    "mode": str,
}


@dataclass(frozen=True)
class DiskDescription:
    """One disk: its template, its logical_id (the template's shape), size in MiB."""

    template: str
    logical_id: tuple[str, ...]
    size: int
    uuid: str
    iv_name: str = ""
    name: str | None = None
    mode: str = "rw"

    def to_wire(self) -> DiskWire:
        """The description as a JSON-ready dict."""
        return {
            "template": self.template,
            "logical_id": list(self.logical_id),
            "size": self.size,
            "uuid": self.uuid,
            "iv_name": self.iv_name,
            "name": self.name,
            "mode": self.mode,
        }

    @classmethod
    def from_wire(cls, data: object) -> DiskDescription:
        """The description sent as ``data``; OpExecError if it is malformed."""
        if not isinstance(data, dict) or set(data) != set(_FIELDS):
            raise errors.OpExecError(f"Invalid disk description {data!r}")
        for key, kind in _FIELDS.items():
            value = data[key]
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise errors.OpExecError(f"Invalid disk description: bad {key} {value!r}")
        logical_id = data["logical_id"]
        if not all(isinstance(part, str) for part in logical_id):
            raise errors.OpExecError(f"Invalid disk description: bad logical_id {logical_id!r}")
        if data["size"] < 0:
            raise errors.OpExecError(f"Invalid disk description: bad size {data['size']!r}")
        return cls(**{**data, "logical_id": tuple(logical_id)})

    def with_logical_id(self, logical_id: list[str] | tuple[str, ...]) -> DiskDescription:
        """The same disk under another logical_id (a rename's target)."""
        return DiskDescription(
            self.template,
            tuple(logical_id),
            self.size,
            self.uuid,
            self.iv_name,
            self.name,
            self.mode,
        )
