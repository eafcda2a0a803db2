"""OP_OS_DIAGNOSE: the OS definitions of all nodes, as rows of fields."""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral import errors
from corral.cmdlib.base import LogicalUnit
from corral.master.resources import oses
from corral.opcodes import os as opos


class LUOsDiagnose(LogicalUnit[opos.OpOsDiagnose]):
    OPCODE = opos.OpOsDiagnose
    REQ_BGL = False

    def check_arguments(self) -> None:
        unknown = [f for f in self.op.output_fields if f not in oses.FIELDS.fields]
        if unknown:
            raise errors.OpPrereqError(
                f"Unknown output fields selected: {', '.join(unknown)}", C.ECODE_INVAL
            )

    async def exec(self) -> Any:
        rows = await oses.items(self.master, set(), None)
        if self.op.names:
            rows = [r for r in rows if r.name in self.op.names]
        # Ganeti's legacy rule: hidden, blacklisted and invalid OSes are left out
        # unless the matching field is asked for.
        fields = set(self.op.output_fields)
        rows = [
            r
            for r in rows
            if ("hidden" in fields or not r.hidden)
            and ("blacklisted" in fields or not r.blacklisted)
            and ("valid" in fields or r.valid)
        ]
        getters = [oses.FIELDS.fields[f].getter for f in self.op.output_fields]
        return [[get(row) for get in getters] for row in rows]
