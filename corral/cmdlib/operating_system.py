"""OP_OS_DIAGNOSE: the OS definitions of all nodes, as rows of fields."""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral import errors
from corral.cmdlib.base import LogicalUnit
from corral.opcodes import os as opos

# Ganeti's legacy rule: hidden, blacklisted and invalid OSes are left out
# unless the field that says so is asked for (field → value that hides a row).
_HIDING = {"hidden": True, "blacklisted": True, "valid": False}


class LUOsDiagnose(LogicalUnit[opos.OpOsDiagnose]):
    OPCODE = opos.OpOsDiagnose
    REQ_BGL = False

    async def exec(self) -> Any:
        fields = list(self.op.output_fields)
        hiding = [f for f in _HIDING if f not in fields]
        qfilter = ["|", *(["=", "name", n] for n in self.op.names)] if self.op.names else None
        result = await self.master.query(C.QR_OS, [*fields, *hiding], qfilter)
        unknown = [f["name"] for f in result["fields"] if f["kind"] == C.QFT_UNKNOWN]
        if unknown:
            raise errors.OpPrereqError(
                f"Unknown output fields selected: {', '.join(unknown)}", C.ECODE_INVAL
            )
        rows = []
        for row in result["data"]:
            values = [value for _, value in row]
            shown = values[: len(fields)]
            if not any(v == _HIDING[f] for f, v in zip(hiding, values[len(fields) :], strict=True)):
                rows.append(shown)
        return rows
