"""The OS definitions of all nodes, gathered and combined per OS.

An OS is valid when it is valid on every node that answered; its variants,
API versions and parameters are those all nodes share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from corral.rpc.calls_os import os_diagnose
from corral.rpc.wire import JsonObject

if TYPE_CHECKING:
    from corral.services.context import Master


@dataclass
class OsRow:
    name: str
    hidden: bool
    blacklisted: bool
    osparams: dict[str, Any]
    # node name → the node's diagnose entry (None: the OS is missing on that node)
    nodes: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    # hypervisor → the OS-specific parameters the cluster has for this OS
    os_hvp: dict[str, Any] = field(default_factory=dict)

    def entries(self) -> list[dict[str, Any]]:
        return [e for e in self.nodes.values() if e is not None]

    @property
    def valid(self) -> bool:
        return bool(self.nodes) and all(e is not None and e["valid"] for e in self.nodes.values())

    def common(self, key: str) -> list[Any]:
        entries = self.entries()
        if not entries:
            return []
        shared = [_hashable(v) for v in entries[0][key]]
        for entry in entries[1:]:
            values = {_hashable(v) for v in entry[key]}
            shared = [v for v in shared if v in values]
        return [list(v) if isinstance(v, tuple) else v for v in shared]

    @property
    def versions(self) -> dict[str, str]:
        return {node: e["os_version"] for node, e in self.nodes.items() if e is not None}

    @property
    def version_consistent(self) -> bool:
        return len(set(self.versions.values())) <= 1


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


async def node_oses(master: Master) -> dict[str, list[JsonObject] | None]:
    """node name → its os_diagnose answer (None if the node did not answer)."""
    nodes = [n for n in master.cfg.nodes() if not n.offline]
    results = await master.rpc.results(nodes, os_diagnose())
    return {n.name: results[n.uuid].value for n in nodes}


async def os_rows(master: Master) -> list[OsRow]:
    """Every OS some node has, with each node's entry (sorted by name)."""
    cluster = master.cfg.cluster
    answers = await node_oses(master)
    rows: dict[str, OsRow] = {}
    reachable = {node: oses for node, oses in answers.items() if oses is not None}
    for node, oses in reachable.items():
        for entry in oses:
            name = entry["name"]
            row = rows.get(name)
            if row is None:
                row = rows[name] = OsRow(
                    name,
                    name in cluster.hidden_os,
                    name in cluster.blacklisted_os,
                    cluster.osparams.get(name, {}),
                    {n: None for n in reachable},
                    cluster.os_hvp.get(name, {}),
                )
            row.nodes[node] = entry
    return [rows[name] for name in sorted(rows)]
