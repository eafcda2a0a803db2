"""A disk as node RPCs name it: a small typed description, never a bare path.

The master builds it from the configuration's disk (``Disk.description()``);
noded rebuilds it with :meth:`DiskDescription.from_wire`, which refuses any
malformed description, and resolves the disk's local path itself through the
template's node-side class (:mod:`corral.node.storage.registry`).  A disk
built on others (a mirrored disk on its per-node volumes) carries their
descriptions as its ``children``, and the nodes holding it, the primary first;
where the nodes must reach each other (to assemble a mirrored disk), the
master adds their ``addresses``: ``[name, secondary IP]`` per node, in the
same order (the name is what the node's certificate says), and which of
them hold a copy that is behind (``outdated``: uuids, as ``nodes``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
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
# Keys a description of an older Corral lacks (an interrupted operation's
# record written before them): missing means empty.
_OPTIONAL: dict[str, type] = {
    "nodes": list,
    "children": list,
    "addresses": list,
    "outdated": list,
}
# A disk tree deeper than this is refused (Ganeti's deepest, drbd over plain, is 2).
MAX_DEPTH = 4


@dataclass(frozen=True)
class DiskDescription:
    """One disk: its template, its logical_id (the template's shape), size in
    MiB, the nodes holding it and the disks it is built on."""

    template: str
    logical_id: tuple[str, ...]
    size: int
    uuid: str
    iv_name: str = ""
    name: str | None = None
    mode: str = "rw"
    nodes: tuple[str, ...] = ()
    children: tuple[DiskDescription, ...] = ()
    addresses: tuple[tuple[str, str], ...] = ()
    outdated: tuple[str, ...] = ()

    def to_wire(self) -> DiskWire:
        """The description as a JSON-ready dict."""
        wire: DiskWire = {
            "template": self.template,
            "logical_id": list(self.logical_id),
            "size": self.size,
            "uuid": self.uuid,
            "iv_name": self.iv_name,
            "name": self.name,
            "mode": self.mode,
            "nodes": list(self.nodes),
            "children": [child.to_wire() for child in self.children],
        }
        if self.addresses:
            wire["addresses"] = [list(pair) for pair in self.addresses]
        if self.outdated:
            wire["outdated"] = list(self.outdated)
        return wire

    @classmethod
    def from_wire(cls, data: object, depth: int = 0) -> DiskDescription:
        """The description sent as ``data``; OpExecError if it is malformed."""
        if not isinstance(data, dict) or not set(_FIELDS) <= set(data) <= {*_FIELDS, *_OPTIONAL}:
            raise errors.OpExecError(f"Invalid disk description {data!r}")
        for key, kind in (*_FIELDS.items(), *_OPTIONAL.items()):
            value = data.get(key, [])
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise errors.OpExecError(f"Invalid disk description: bad {key} {value!r}")
        for key in ("logical_id", "nodes", "outdated"):
            if not all(isinstance(part, str) for part in data.get(key, [])):
                raise errors.OpExecError(f"Invalid disk description: bad {key} {data[key]!r}")
        addresses = data.get("addresses", [])
        if not all(
            isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)
            for pair in addresses
        ) or len(addresses) not in (0, len(data.get("nodes", []))):
            raise errors.OpExecError(f"Invalid disk description: bad addresses {addresses!r}")
        if not set(data.get("outdated", [])) <= set(data.get("nodes", [])):
            raise errors.OpExecError(
                f"Invalid disk description: outdated {data['outdated']!r} not among its nodes"
            )
        if data["size"] < 0:
            raise errors.OpExecError(f"Invalid disk description: bad size {data['size']!r}")
        children = data.get("children", [])
        if children and depth >= MAX_DEPTH:
            raise errors.OpExecError("Invalid disk description: its children nest too deep")
        return cls(
            **{key: data[key] for key in _FIELDS if key != "logical_id"},
            logical_id=tuple(data["logical_id"]),
            nodes=tuple(data.get("nodes", [])),
            children=tuple(cls.from_wire(child, depth + 1) for child in children),
            addresses=tuple((name, ip) for name, ip in addresses),
            outdated=tuple(data.get("outdated", [])),
        )

    def with_logical_id(self, logical_id: list[str] | tuple[str, ...]) -> DiskDescription:
        """The same disk under another logical_id (a rename's target)."""
        return replace(self, logical_id=tuple(logical_id))
