"""OS opcodes."""

from __future__ import annotations

from pydantic import Field

from corral.opcodes.base import OpCode
from corral.opcodes.types import NonEmptyStr


class OpOsDiagnose(OpCode):
    """Query the OS definitions of all nodes (``output_fields`` as Query("os"))."""

    OP_ID = "OP_OS_DIAGNOSE"

    output_fields: list[NonEmptyStr]
    names: list[NonEmptyStr] = Field(default_factory=list)
