"""OP_OS_DIAGNOSE: the OS definitions of all nodes, as rows of fields."""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral import errors
from corral.cmdlib.base import LogicalUnit
from corral.opcodes import os as opos
from corral.query.legacy import os_diagnose_filter


class LUOsDiagnose(LogicalUnit[opos.OpOsDiagnose]):
    OPCODE = opos.OpOsDiagnose
    REQ_BGL = False

    async def exec(self) -> Any:
        fields = list(self.op.output_fields)
        qfilter = os_diagnose_filter(fields, list(self.op.names))
        result = await self.master.query(C.QR_OS, fields, qfilter)
        unknown = [f["name"] for f in result["fields"] if f["kind"] == C.QFT_UNKNOWN]
        if unknown:
            raise errors.OpPrereqError(
                f"Unknown output fields selected: {', '.join(unknown)}", C.ECODE_INVAL
            )
        return [[value for _, value in row] for row in result["data"]]
