"""ExtStorage opcodes."""

from __future__ import annotations

from pydantic import Field

from corral.opcodes.base import OpCode
from corral.opcodes.types import NonEmptyStr


class OpExtStorageDiagnose(OpCode):
    """Compute the list of external storage providers (``output_fields`` of
    name, node_status, nodegroup_status, parameters)."""

    OP_ID = "OP_EXT_STORAGE_DIAGNOSE"

    output_fields: list[NonEmptyStr]
    names: list[NonEmptyStr] = Field(default_factory=list)
