"""The "os" resource: OS definitions as every node reports them, combined.

An OS is valid when it is valid on every node that answered; its variants,
API versions and parameters are those all nodes share.  ``os_version`` is
compared across nodes (the 2.2 design's check that Ganeti never built).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral.master.resources.common import Names
from corral.query.fields import Field, FieldSet
from corral.services.oses import OsRow, os_rows

if TYPE_CHECKING:
    from corral.services.context import Master


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


async def items(master: Master, needs: set[str], names: Names) -> list[OsRow]:
    return await os_rows(master)
