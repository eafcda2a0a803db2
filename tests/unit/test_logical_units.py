"""Every opcode Corral accepts has a logical unit: one it does not have is
refused at the door (luxi: OpCodeUnknown, RAPI: 501), never queued."""

from __future__ import annotations

import pytest

import corral.cmdlib.units  # noqa: F401  (registers every logical unit)
from corral import errors
from corral.cmdlib.base import lu_class
from corral.opcodes import from_dict, registry


def test_every_accepted_opcode_has_a_logical_unit() -> None:
    ours = [op_id for op_id, cls in registry().items() if cls.__module__.startswith("corral.")]
    assert len(ours) >= 49
    assert sorted(op_id for op_id in ours if lu_class(op_id) is None) == []


def test_an_opcode_without_a_unit_is_refused_at_the_door() -> None:
    with pytest.raises(errors.OpCodeUnknown, match="OP_INSTANCE_CHANGE_GROUP"):
        from_dict({"OP_ID": "OP_INSTANCE_CHANGE_GROUP", "instance_name": "i1"})
