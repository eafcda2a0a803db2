"""Tests of opcode validation, wire form and summaries."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import Field

from corral import constants as C
from corral import errors
from corral.constants import REDACTED
from corral.opcodes import OpCode, from_dict, registry
from corral.opcodes.cluster import OpClusterPostInit, OpClusterVerify, OpClusterVerifyGroup
from corral.opcodes.tags import OpTagsSearch, OpTagsSet
from corral.opcodes.test import OpTestDelay, OpTestJqueue


class OpTestRedaction(OpCode):
    """An opcode with secret and private fields, for the redaction tests."""

    OP_ID = "OP_TEST_OPCODES_REDACTION"
    SECRET_FIELDS: ClassVar[tuple[str, ...]] = ("osparams_secret",)
    PRIVATE_FIELDS: ClassVar[tuple[str, ...]] = ("osparams_private",)

    osparams_secret: dict[str, Any] = Field(default_factory=dict)
    osparams_private: dict[str, Any] = Field(default_factory=dict)
    osparams: dict[str, Any] = Field(default_factory=dict)


def prereq(data: Any) -> errors.OpPrereqError:
    with pytest.raises(errors.OpPrereqError) as info:
        from_dict(data)
    assert info.value.ecode == C.ECODE_INVAL
    return info.value


# Registry


def test_registry_holds_the_declared_opcodes() -> None:
    reg = registry()
    for op_id in (
        "OP_CLUSTER_POST_INIT",
        "OP_CLUSTER_DESTROY",
        "OP_CLUSTER_QUERY",
        "OP_CLUSTER_VERIFY",
        "OP_CLUSTER_VERIFY_CONFIG",
        "OP_CLUSTER_VERIFY_GROUP",
        "OP_CLUSTER_SET_PARAMS",
        "OP_TAGS_GET",
        "OP_TAGS_SEARCH",
        "OP_TAGS_SET",
        "OP_TAGS_DEL",
        "OP_TEST_DELAY",
        "OP_TEST_JQUEUE",
    ):
        assert op_id == reg[op_id].OP_ID
    # Abstract helper classes without an OP_ID are not registered.
    assert "" not in reg


def test_duplicate_op_id_is_a_programmer_error() -> None:
    with pytest.raises(errors.ProgrammerError, match="Duplicate opcode OP_TEST_DELAY"):

        class _Again(OpCode):
            OP_ID = "OP_TEST_DELAY"

    assert registry()["OP_TEST_DELAY"] is OpTestDelay


# from_dict validation


@pytest.mark.parametrize("data", [None, [], "OP_TEST_DELAY", 5, [{"OP_ID": "OP_TEST_DELAY"}]])
def test_non_dict_is_wrong_input(data: Any) -> None:
    err = prereq(data)
    assert "JSON object" in err.args[0]


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"duration": 1.0},
        {"OP_ID": "OP_NO_SUCH_THING"},
        {"OP_ID": 5},
        {"OP_ID": None},
        {"OP_ID": "op_test_delay", "duration": 1.0},
    ],
)
def test_unknown_op_id_is_op_code_unknown(data: dict[str, Any]) -> None:
    with pytest.raises(errors.OpCodeUnknown, match="Unknown opcode"):
        from_dict(data)


@pytest.mark.parametrize(
    ("data", "param"),
    [
        ({"OP_ID": "OP_TEST_DELAY", "duration": "ten"}, "duration"),
        ({"OP_ID": "OP_TEST_DELAY", "duration": "10"}, "duration"),
        ({"OP_ID": "OP_TEST_DELAY", "duration": -1.0}, "duration"),
        ({"OP_ID": "OP_TEST_DELAY", "duration": None}, "duration"),
        ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "repeat": True}, "repeat"),
        ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "repeat": -1}, "repeat"),
        ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "repeat": 1.5}, "repeat"),
        ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "on_master": "yes"}, "on_master"),
        ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "on_master": 1}, "on_master"),
        ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "on_nodes": "node1"}, "on_nodes"),
        ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "on_nodes": [1]}, "on_nodes.0"),
        ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "priority": 20}, "priority"),
        ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "priority": -21}, "priority"),
        ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "priority": 1}, "priority"),
        ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "priority": -20}, "priority"),
        ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "priority": "high"}, "priority"),
        ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "debug_level": -1}, "debug_level"),
        ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "dry_run": "no"}, "dry_run"),
        ({"OP_ID": "OP_TEST_DELAY", "duration": 1, "comment": 5}, "comment"),
        ({"OP_ID": "OP_TEST_JQUEUE", "log_messages": "hello"}, "log_messages"),
        ({"OP_ID": "OP_TEST_JQUEUE", "fail": "true"}, "fail"),
        ({"OP_ID": "OP_TAGS_SET", "kind": "volume", "tags": ["a"]}, "kind"),
        ({"OP_ID": "OP_TAGS_SEARCH", "pattern": ""}, "pattern"),
        ({"OP_ID": "OP_CLUSTER_SET_PARAMS", "max_running_jobs": 0}, "max_running_jobs"),
    ],
)
def test_wrong_types_are_wrong_input_naming_the_parameter(data: dict[str, Any], param: str) -> None:
    err = prereq(data)
    message = err.args[0]
    assert message.startswith(f"Invalid {data['OP_ID']}: ")
    assert f"parameter '{param}'" in message


@pytest.mark.parametrize(
    ("data", "param"),
    [
        ({"OP_ID": "OP_TEST_DELAY"}, "duration"),
        ({"OP_ID": "OP_TAGS_SET", "kind": "cluster"}, "tags"),
        ({"OP_ID": "OP_CLUSTER_VERIFY_GROUP"}, "group_name"),
    ],
)
def test_missing_required_parameter_is_named(data: dict[str, Any], param: str) -> None:
    err = prereq(data)
    assert f"parameter '{param}'" in err.args[0]
    assert "required" in err.args[0].lower()


def test_unknown_parameter_is_reported() -> None:
    err = prereq({"OP_ID": "OP_TEST_DELAY", "duration": 1.0, "bogus": 1, "other": 2})
    assert "unknown parameter 'bogus'" in err.args[0]
    assert "unknown parameter 'other'" in err.args[0]


@pytest.mark.parametrize(
    "depends",
    [
        "5",
        [5],
        [[1]],
        [[1, ["success"], "x"]],
        [["-1", ["success"]]],
        [["1x", ["success"]]],
        [[True, ["success"]]],
        [[1.0, ["success"]]],
        [[1, "success"]],
        [[1, ["running"]]],
        [[1, ["queued"]]],
        [[1, ["success", "bogus"]]],
        [[1, [["success"]]]],
        [[1, [{"s": 1}]]],
        [[1, [None]]],
    ],
)
def test_bad_depends_is_wrong_input(depends: Any) -> None:
    err = prereq({"OP_ID": "OP_TEST_DELAY", "duration": 1.0, "depends": depends})
    assert "parameter 'depends" in err.args[0]


def test_good_depends_are_accepted() -> None:
    deps = [[-1, []], [5, ["success", "error"]], [7, ["canceled"]]]
    op = from_dict({"OP_ID": "OP_TEST_DELAY", "duration": 1.0, "depends": deps})
    assert op.depends == deps


def test_job_ids_as_digit_strings_are_numbers() -> None:
    # As Ganeti's TJobId (Ganeti 2's RAPI handed job ids out as strings).
    deps = [["12", ["success"]]]
    op = from_dict({"OP_ID": "OP_TEST_DELAY", "duration": 1.0, "depends": deps})
    assert op.depends == [[12, ["success"]]]


@pytest.mark.parametrize(
    "reason",
    [
        [["source", "text"]],
        [[1, "text", 0]],
        [["source", 2, 0]],
        ["source"],
    ],
)
def test_bad_reason_is_wrong_input(reason: Any) -> None:
    err = prereq({"OP_ID": "OP_TEST_DELAY", "duration": 1.0, "reason": reason})
    assert "parameter 'reason" in err.args[0]


def test_defaults_follow_ganeti() -> None:
    op = from_dict({"OP_ID": "OP_TEST_DELAY", "duration": 2.5})
    assert isinstance(op, OpTestDelay)
    assert (op.on_master, op.on_nodes, op.on_node_uuids) == (True, [], None)
    assert (op.repeat, op.interruptible, op.no_locks) == (0, False, True)
    assert (op.dry_run, op.debug_level, op.priority) == (None, None, C.OP_PRIO_NORMAL)
    assert (op.depends, op.comment, op.reason) == (None, None, [])
    jq = from_dict({"OP_ID": "OP_TEST_JQUEUE"})
    assert isinstance(jq, OpTestJqueue)
    assert (jq.notify_waitlock, jq.notify_exec, jq.log_messages, jq.fail) == (
        False,
        False,
        [],
        False,
    )


def test_integer_duration_becomes_a_float() -> None:
    op = from_dict({"OP_ID": "OP_TEST_DELAY", "duration": 10})
    assert isinstance(op, OpTestDelay)
    assert isinstance(op.duration, float)
    assert op.duration == 10.0


# Wire form


@pytest.mark.parametrize(
    "data",
    [
        {"OP_ID": "OP_TEST_DELAY", "duration": 0.5, "on_nodes": ["n1", "n2"], "repeat": 3},
        {"OP_ID": "OP_TEST_JQUEUE", "log_messages": ["A", "", "B"], "fail": True},
        {"OP_ID": "OP_CLUSTER_POST_INIT", "priority": C.OP_PRIO_HIGH, "comment": "hi"},
        {"OP_ID": "OP_CLUSTER_VERIFY", "skip_checks": ["nplusone_mem"], "error_codes": True},
        {"OP_ID": "OP_TAGS_SET", "kind": "node", "name": "n1", "tags": ["a", "b"]},
        {"OP_ID": "OP_TAGS_SEARCH", "pattern": "^a"},
        {
            "OP_ID": "OP_CLUSTER_SET_PARAMS",
            "hvparams": {"kvm": {"kernel_path": "/boot/vmlinuz"}},
            "hidden_os": [["add", "lenny"]],
            "depends": [[3, ["success"]]],
            "reason": [["gnt:client", "because", 1234567890]],
        },
    ],
)
def test_to_dict_round_trip(data: dict[str, Any]) -> None:
    op = from_dict(data)
    wire = op.to_dict()
    assert wire["OP_ID"] == data["OP_ID"]
    for key, value in data.items():
        assert wire[key] == value
    # Through JSON (as on the wire) and back gives the same opcode.
    again = from_dict(json.loads(json.dumps(wire)))
    assert type(again) is type(op)
    assert again == op
    assert again.to_dict() == wire


def test_to_dict_has_defaults_but_no_nulls() -> None:
    # As luxid stores an opcode: fields with a default are written, unset
    # optional ones are left out, but for depends and comment (always there).
    wire = OpTestDelay(duration=1.0).to_dict()
    assert wire == {
        "OP_ID": "OP_TEST_DELAY",
        "priority": 0,
        "depends": None,
        "comment": None,
        "reason": [],
        "duration": 1.0,
        "on_master": True,
        "on_nodes": [],
        "repeat": 0,
        "interruptible": False,
        "no_locks": True,
    }


@pytest.mark.parametrize(
    "field", ["dry_run", "debug_level", "priority", "depends", "comment", "reason", "on_nodes"]
)
def test_null_means_not_given(field: str) -> None:
    # What Ganeti's own library sends for options left unset.
    op = from_dict({"OP_ID": "OP_TEST_DELAY", "duration": 1.0, field: None})
    assert op == OpTestDelay(duration=1.0)


@given(
    duration=st.floats(min_value=0, max_value=1e9, allow_nan=False),
    repeat=st.integers(min_value=0, max_value=2**31),
    on_nodes=st.lists(st.text(min_size=1, max_size=10), max_size=4),
    priority=st.sampled_from(sorted(C.OP_PRIO_SUBMIT_VALID)),
    comment=st.none() | st.text(max_size=20),
)
def test_test_delay_wire_round_trip(
    duration: float, repeat: int, on_nodes: list[str], priority: int, comment: str | None
) -> None:
    op = OpTestDelay(
        duration=duration, repeat=repeat, on_nodes=on_nodes, priority=priority, comment=comment
    )
    again = from_dict(json.loads(json.dumps(op.to_dict())))
    assert again == op


def test_secret_and_private_redaction() -> None:
    op = from_dict(
        {
            "OP_ID": "OP_TEST_OPCODES_REDACTION",
            "osparams_secret": {"password": "hunter2"},
            "osparams_private": {"key": "private-value"},
            "osparams": {"public": "visible"},
        }
    )
    full = op.to_dict()
    assert full["osparams_secret"] == {"password": "hunter2"}
    assert full["osparams_private"] == {"key": "private-value"}

    stored = op.to_dict(keep_secret=False)
    assert stored["osparams_secret"] == {"password": REDACTED}
    assert stored["osparams_private"] == {"key": "private-value"}
    assert stored["osparams"] == {"public": "visible"}

    shown = op.to_dict(keep_secret=False, redact_private=True)
    assert shown["osparams_private"] == {"key": REDACTED}
    assert shown["osparams"] == {"public": "visible"}
    # The opcode itself is unchanged.
    assert op.osparams_secret == {"password": "hunter2"}  # type: ignore[attr-defined]


def test_redaction_of_empty_secrets_keeps_them_empty() -> None:
    op = OpTestRedaction()
    assert op.to_dict(keep_secret=False)["osparams_secret"] == {}


# Summaries


@pytest.mark.parametrize(
    ("op", "summary"),
    [
        (OpTestDelay(duration=10.0), "TEST_DELAY(10.0)"),
        (from_dict({"OP_ID": "OP_TEST_DELAY", "duration": 10}), "TEST_DELAY(10.0)"),
        (OpTestDelay(duration=0.5), "TEST_DELAY(0.5)"),
        (OpTestDelay(duration=0), "TEST_DELAY(0.0)"),
        (OpClusterPostInit(), "CLUSTER_POST_INIT"),
        (OpClusterVerify(), "CLUSTER_VERIFY"),
        (OpTestJqueue(fail=True), "TEST_JQUEUE"),
        (OpTagsSearch(pattern="pattern"), "TAGS_SEARCH(pattern)"),
        (OpTagsSet(kind="cluster", tags=["a"]), "TAGS_SET"),
        (OpClusterVerifyGroup(group_name="default"), "CLUSTER_VERIFY_GROUP(default)"),
    ],
)
def test_summary(op: OpCode, summary: str) -> None:
    assert op.summary() == summary


def test_summary_shows_the_whole_value() -> None:
    # LUClusterVerify passes the group UUID; Ganeti shows it in full.
    uuid = "0d4a3bfc-5c4c-4e6f-9d0a-6a1b2f1f5e37"
    assert OpClusterVerifyGroup(group_name=uuid).summary() == f"CLUSTER_VERIFY_GROUP({uuid})"
    pattern = "^(web|db)-[0-9]+\\.example\\.com$"
    assert OpTagsSearch(pattern=pattern).summary() == f"TAGS_SEARCH({pattern})"


def test_summary_joins_list_values() -> None:
    class OpTestSummaryList(OpCode):
        OP_ID = "OP_TEST_OPCODES_SUMMARY_LIST"
        OP_DSC_FIELD = "names"

        names: list[str] = Field(default_factory=list)

    assert OpTestSummaryList(names=["a", "b"]).summary() == "TEST_OPCODES_SUMMARY_LIST(a,b)"
