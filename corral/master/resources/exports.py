"""The "export" resource: instance exports found on the nodes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from corral import constants as C
from corral.master.resources.common import Names
from corral.query.fields import NODATA, OFFLINE, Field, FieldSet, Unavailable
from corral.rpc.calls_impexp import export_list

if TYPE_CHECKING:
    from corral.services.context import Master


@dataclass
class ExportRow:
    node: str
    # The export's name, or why the node could not tell.
    export: str | Unavailable


FIELDS = FieldSet(
    [
        Field("node", "Node", C.QFT_TEXT, "Node name", lambda r: r.node),
        Field("export", "Export", C.QFT_TEXT, "Export name", lambda r: r.export),
    ]
)


async def items(master: Master, needs: set[str], names: Names) -> list[ExportRow]:
    """One row per export of every node; a node that cannot answer gives one
    row saying so (offline, or no data)."""
    nodes = master.cfg.nodes()
    online = [n for n in nodes if not n.offline]
    results = await master.rpc.results(online, export_list())
    rows: list[ExportRow] = []
    for node in sorted(nodes, key=lambda n: n.name):
        if node.offline:
            rows.append(ExportRow(node.name, OFFLINE))
            continue
        result = results[node.uuid]
        if result.failed:
            rows.append(ExportRow(node.name, NODATA))
            continue
        rows += [ExportRow(node.name, name) for name in result.payload]
    return rows
