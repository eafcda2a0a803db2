"""The "os" resource: OS definitions as every node reports them, combined.

An OS is valid when it is valid on every node that answered; its variants,
API versions and parameters are those all nodes share.  ``os_version`` is
compared across nodes (the 2.2 design's check that Ganeti never built).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral.master.resources.common import Names
from corral.query.fields import Field, FieldSet

if TYPE_CHECKING:
    from corral.cmdlib.base import Master


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


def _node_status(row: OsRow) -> dict[str, list[list[Any]]]:
    out: dict[str, list[list[Any]]] = {}
    for node, entry in row.nodes.items():
        if entry is None:
            out[node] = []
        else:
            out[node] = [
                [
                    entry["path"],
                    entry["valid"],
                    entry["error"],
                    entry["variants"],
                    entry["parameters"],
                    entry["api_versions"],
                    entry["trusted"],
                ],
                # Directories of the same name later in the search path (not used).
                *(
                    [path, valid, error, [], [], [], True]
                    for path, valid, error in entry.get("shadowed", [])
                ),
            ]
    return out


FIELDS = FieldSet(
    [
        Field("name", "Name", C.QFT_TEXT, "Operating system name", lambda r: r.name),
        Field(
            "valid",
            "Valid",
            C.QFT_BOOL,
            "Whether operating system definition is valid",
            lambda r: r.valid,
        ),
        Field(
            "hidden", "Hidden", C.QFT_BOOL, "Whether operating system is hidden", lambda r: r.hidden
        ),
        Field(
            "blacklisted",
            "Blacklisted",
            C.QFT_BOOL,
            "Whether operating system is blacklisted",
            lambda r: r.blacklisted,
        ),
        Field(
            "variants",
            "Variants",
            C.QFT_OTHER,
            "Operating system variants",
            lambda r: r.common("variants"),
        ),
        Field(
            "api_versions",
            "ApiVersions",
            C.QFT_OTHER,
            "Operating system API versions",
            lambda r: r.common("api_versions"),
        ),
        Field(
            "parameters",
            "Parameters",
            C.QFT_OTHER,
            "Operating system parameters",
            lambda r: r.common("parameters"),
        ),
        Field("node_status", "NodeStatus", C.QFT_OTHER, "Status from node", _node_status),
        Field(
            "os_hvp",
            "OsHypervisorParams",
            C.QFT_OTHER,
            "Operating system specific hypervisor parameters",
            lambda r: r.os_hvp,
        ),
        Field(
            "osparams",
            "OsParameters",
            C.QFT_OTHER,
            "Operating system specific parameters",
            lambda r: r.osparams,
        ),
        Field(
            "trusted",
            "Trusted",
            C.QFT_BOOL,
            "Whether this OS is trusted",
            lambda r: all(e["trusted"] for e in r.entries()),
        ),
        Field(
            "os_version",
            "OsVersion",
            C.QFT_OTHER,
            "The os_version file per node",
            lambda r: r.versions,
        ),
        Field(
            "os_version_consistent",
            "OsVersionConsistent",
            C.QFT_BOOL,
            "Whether all nodes have the same os_version",
            lambda r: r.version_consistent,
        ),
    ]
)


async def node_oses(master: Master) -> dict[str, list[dict[str, Any]] | None]:
    """node name → its os_diagnose answer (None if the node did not answer)."""
    nodes = [n for n in master.cfg.nodes() if not n.offline]
    results = await master.rpc.call([(n.uuid, n.primary_ip) for n in nodes], "os_diagnose", [])
    return {n.name: (None if results[n.uuid].fail_msg else results[n.uuid].payload) for n in nodes}


async def items(master: Master, needs: set[str], names: Names) -> list[OsRow]:
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
