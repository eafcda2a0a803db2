"""OP_EXT_STORAGE_DIAGNOSE: the ExtStorage providers of all nodes, as rows of fields."""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral import errors
from corral.cmdlib.base import LogicalUnit
from corral.opcodes import storage as opstorage
from corral.query.fields import Field, FieldSet
from corral.services.extstorage import ProviderRow, provider_rows

# Ganeti's EXTSTORAGE_FIELDS.
FIELDS = FieldSet(
    [
        Field("name", "Name", C.QFT_TEXT, "ExtStorage provider name", lambda r: r.name),
        Field("node_status", "NodeStatus", C.QFT_OTHER, "Status from node",
              lambda r: r.node_status),
        Field("nodegroup_status", "NodegroupStatus", C.QFT_OTHER, "Overall Nodegroup status",
              lambda r: r.nodegroup_status),
        Field("parameters", "Parameters", C.QFT_OTHER, "ExtStorage provider parameters",
              lambda r: r.parameters),
    ]
)  # fmt: skip


class LUExtStorageDiagnose(LogicalUnit[opstorage.OpExtStorageDiagnose]):
    """Rows of ``output_fields`` for every provider (or those of ``names``, in
    the order asked; a name no node has gives no row).  Takes no locks, as Ganeti's."""

    OPCODE = opstorage.OpExtStorageDiagnose
    REQ_BGL = False

    def check_arguments(self) -> None:
        unknown = [f for f in self.op.output_fields if f not in FIELDS.fields]
        if unknown:
            raise errors.OpPrereqError(
                f"Unknown output fields selected: {', '.join(unknown)}", C.ECODE_INVAL
            )

    async def exec(self) -> Any:
        rows = await provider_rows(self.master)
        if self.op.names:
            by_name = {row.name: row for row in rows}
            rows = [by_name[n] for n in dict.fromkeys(self.op.names) if n in by_name]
        getters = [FIELDS.fields[f].getter for f in self.op.output_fields]
        return [_values(row, getters) for row in rows]


def _values(row: ProviderRow, getters: list[Any]) -> list[Any]:
    return [getter(row) for getter in getters]
