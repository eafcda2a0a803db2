"""Corral's opcodes against Ganeti 3.0.2's own declarations.

Ganeti's library (``ganeti.opcodes``, with its ``ht`` type checks) is asked
for every opcode Corral serves: the field names, defaults, which fields are
required, and whether each of a set of probe values passes the field's type
check.  Corral must declare the same fields with the same defaults, and
accept exactly the values Ganeti accepts, but for the few deliberate
differences listed below (and Corral's own fields, which Ganeti's lack).  A
field Corral does not implement yet counts as accepting a value when it
refuses it as "not supported by Corral yet": the type is right, the feature
is missing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from corral import errors
from corral.opcodes import from_dict
from tests.conformance.ganeti import ganeti_library
from tests.helpers.opcodes import SERVED, required_values

PROBES: list[Any] = [
    True, False, 0, 1, 7, 20, -1, 2.5, "", "x", "create", "import", "hard", "soft",
    "cluster", "node", "loop", "fake", "file", "admin", "nplusone_mem", "ENODEOS",
    [], ["x"], [""], [1], [True], [[1, 2]], [[1]], [["add", "x"]], [["remove", "y"]],
    [["bogus", "x"]], [["add", ""]], [["add", 0, {}]], [["add", {}]], [[0, {"size": 1}]],
    [["modify", "0", {"mode": "ro"}]], [["add", -1, {"size": 1}]], [["attach", {}]],
    [{"size": 1}], [{"size": "1g", "mode": "rw"}], [{"mac": "auto"}], [{"bogus": "x"}],
    [{"link": None}], [{"size": True}], [{"": "x"}], ["fake", "kvm"], ["file"], ["ENODEOS"],
    ["nplusone_mem"], [["x", ["success"]]], [[1, ["success"]]], [[-1, []]],
    [["src", "text", 1]], {}, {"a": "b"}, {"a": 1}, {"a": {"b": 1}}, {"file": {}},
    {"mode": "routed"}, {"a": True}, {"kvm": {"x": 1}}, {"bogus": {}},
]  # fmt: skip

# Where Corral checks a field's value more strictly than Ganeti's Python type
# check, on purpose; luxid (which reads every job in 3.0.2) is as strict.
STRICTER = {
    ("OP_TEST_DELAY", "duration"): "a negative delay is refused at submission",
    ("*", "reason"): "luxid reads a reason trail of [source, text, timestamp] entries",
    ("*", "skip_checks"): "luxid reads a set from a JSON list only ('' and {} are iterable)",
    ("*", "ignore_errors"): "luxid reads a set from a JSON list only",
}


# Fields of Corral's own, which Ganeti's opcodes lack (documented in the README).
CORRAL_OWN = {
    ("OP_CLUSTER_SET_PARAMS", "etcd_members"): "etcd members on the master candidates",
}


def python_quirk(probe: Any, ganeti_type: str) -> bool:
    """Python's ``True == 1`` lets a boolean through Ganeti's numeric choice
    checks (``OneOf 0, 10, -10``); Haskell's luxid refuses it."""
    return isinstance(probe, bool) and ganeti_type.startswith("OneOf") and "True" not in ganeti_type


def stricter(op_id: str, name: str) -> bool:
    return (op_id, name) in STRICTER or ("*", name) in STRICTER


_DUMP = r"""
import json, sys
from ganeti import opcodes, serializer

request = json.load(sys.stdin)

def private(value, depth):
    # Ganeti wraps private parameter values once it has read them from JSON.
    if not isinstance(value, dict):
        return value
    if depth == 0:
        return {k: serializer.Private(v) for k, v in value.items()}
    return {k: private(v, depth - 1) for k, v in value.items()}

def variants(value):
    yield value
    yield private(value, 0)
    yield private(value, 1)
    if isinstance(value, list):
        # Ganeti declares tuples; on the wire they are JSON lists.
        yield [tuple(v) if isinstance(v, list) else v for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        yield float(value)  # Ganeti's Validate takes integers for floats

def check(test, value):
    try:
        return bool(test(value))
    except TypeError:  # e.g. a list tested for membership in a frozenset
        return False

def accepts(test, value):
    return any(check(test, v) for v in variants(value))

def plain(value):
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)

out = {}
for op_id in request["ops"]:
    fields = {}
    for name, default, test, _doc in opcodes.OP_MAPPING[op_id].GetAllParams():
        fields[name] = {
            "default": plain(default),
            "required": default is None and not test(None),
            "type": str(test),
            "accepts": [accepts(test, p) for p in request["probes"]],
        }
    out[op_id] = fields
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def declarations(ganeti: Path) -> dict[str, dict[str, Any]]:
    """Ganeti's declaration of every opcode Corral serves."""
    request = json.dumps({"ops": sorted(SERVED), "probes": PROBES})
    result = ganeti_library(_DUMP, stdin=request)
    assert result.rc == 0, result.stderr
    dump: dict[str, dict[str, Any]] = json.loads(result.stdout)
    return dump


def corral_accepts(op_id: str, field: str, value: Any) -> bool:
    values = required_values(op_id).items()
    data = {"OP_ID": op_id, **{k: v for k, v in values if k in fields_of(op_id)}}
    data[field] = value
    try:
        from_dict(data)
    except errors.OpPrereqError as err:
        return "not supported by Corral yet" in str(err)
    return True


def fields_of(op_id: str) -> set[str]:
    return set(SERVED[op_id].model_fields)


@pytest.mark.parametrize("op_id", sorted(SERVED))
def test_same_fields(op_id: str, declarations: dict[str, dict[str, Any]]) -> None:
    ours = {name for name in fields_of(op_id) if (op_id, name) not in CORRAL_OWN}
    assert ours == set(declarations[op_id])


@pytest.mark.parametrize("op_id", sorted(SERVED))
def test_same_defaults_and_required_fields(
    op_id: str, declarations: dict[str, dict[str, Any]]
) -> None:
    model = SERVED[op_id].model_fields
    for name, ganeti in declarations[op_id].items():
        info = model[name]
        assert info.is_required() == ganeti["required"], name
        if not info.is_required() and ganeti["default"] is not None:
            assert info.get_default(call_default_factory=True) == ganeti["default"], name


@pytest.mark.parametrize("op_id", sorted(SERVED))
def test_null_is_not_given_unless_required(
    op_id: str, declarations: dict[str, dict[str, Any]]
) -> None:
    for name, ganeti in declarations[op_id].items():
        assert corral_accepts(op_id, name, None) != ganeti["required"], name


@pytest.mark.parametrize("op_id", sorted(SERVED))
def test_same_values_accepted(op_id: str, declarations: dict[str, dict[str, Any]]) -> None:
    differences = []
    for name, ganeti in declarations[op_id].items():
        for probe, ganeti_ok in zip(PROBES, ganeti["accepts"], strict=True):
            corral_ok = corral_accepts(op_id, name, probe)
            if corral_ok == ganeti_ok:
                continue
            if (
                ganeti_ok
                and not corral_ok
                and (stricter(op_id, name) or python_quirk(probe, ganeti["type"]))
            ):
                continue
            verdict = "accepts" if corral_ok else "refuses"
            differences.append(f"{name}={probe!r}: Corral {verdict} ({ganeti['type']})")
    assert not differences, "\n".join(differences)
