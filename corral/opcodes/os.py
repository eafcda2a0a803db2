"""OS opcodes."""

from __future__ import annotations

from pydantic import Field

from corral.opcodes.base import OpCode


class OpOsDiagnose(OpCode):
    """Query the OS definitions of all nodes (``output_fields`` as Query("os"))."""

    OP_ID = "OP_OS_DIAGNOSE"

    output_fields: list[str]
    names: list[str] = Field(default_factory=list)
