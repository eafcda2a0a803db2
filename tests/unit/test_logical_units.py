"""Every opcode Corral accepts has a logical unit: one it does not have is
refused at the door (luxi: OpCodeUnknown, RAPI: 501), never queued."""

from __future__ import annotations

import subprocess
import sys

import pytest

from corral import errors
from corral.cmdlib import units
from corral.cmdlib.base import lu_class
from corral.opcodes import from_dict, registry


def test_every_accepted_opcode_has_a_logical_unit() -> None:
    units.load_all()
    ours = [op_id for op_id, cls in registry().items() if cls.__module__.startswith("corral.")]
    assert len(ours) >= 49
    assert sorted(op_id for op_id in ours if lu_class(op_id) is None) == []


def test_the_table_of_unit_modules_names_where_each_unit_is() -> None:
    """masterd imports a unit's module when its opcode first runs, by this table."""
    units.load_all()
    ours = [op_id for op_id, cls in registry().items() if cls.__module__.startswith("corral.")]
    where = {
        op_id: module.removeprefix(f"{units.PACKAGE}.")
        for op_id in ours
        if (module := getattr(lu_class(op_id), "__module__", None))
    }
    table = {op_id: module for module, op_ids in units.MODULES.items() for op_id in op_ids}
    assert where == table


LAZY = """
import asyncio, sys
import corral.master.daemon
from corral.cmdlib import units
assert "corral.cmdlib.instance_move" not in sys.modules
cls = asyncio.run(units.unit_for("OP_INSTANCE_MOVE"))
assert cls is not None and cls.__module__ == "corral.cmdlib.instance_move", cls
assert asyncio.run(units.unit_for("OP_NO_SUCH_THING")) is None
"""


def test_masterd_loads_a_unit_when_its_opcode_first_runs() -> None:
    subprocess.run([sys.executable, "-c", LAZY], check=True)


def test_an_opcode_without_a_unit_is_refused_at_the_door() -> None:
    with pytest.raises(errors.OpCodeUnknown, match="OP_INSTANCE_CHANGE_GROUP"):
        from_dict({"OP_ID": "OP_INSTANCE_CHANGE_GROUP", "instance_name": "i1"})
