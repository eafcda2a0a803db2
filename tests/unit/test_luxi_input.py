"""Hostile luxi input, piece by piece: what the protocol refuses, the filter
budget, regular-expression limits, job-rule expressions and OS names."""

from __future__ import annotations

import json
from typing import Any

import pytest

from corral import constants as C
from corral import errors
from corral.jobs import filters as job_filters
from corral.luxi import protocol
from corral.opcodes.base import from_dict
from corral.query.filter import FILTER_BUDGET, compile_filter, compile_regex


def frame(args: str) -> bytes:
    return b'{"method": "Query", "args": ' + args.encode() + b"}"


@pytest.mark.parametrize(
    ("args", "text"),
    [
        ("[NaN]", "NaN is not a number"),
        ("[Infinity]", "Infinity is not a number"),
        ("[-Infinity]", "-Infinity is not a number"),
        ("[1e999]", "number 1e999 out of range"),
        (f"[{2**63}]", "out of range"),
        (f"[{-(2**63) - 1}]", "out of range"),
        ('["\\ud800"]', "lone surrogate"),
        ('["x\\udfff"]', "lone surrogate"),
        ("[" * 200 + "]" * 200, "nested more than 128 levels"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_request_beyond_what_luxi_takes_is_refused(args: str, text: str) -> None:
    with pytest.raises(errors.LuxiError, match=text):
        protocol.parse_request(frame(args))


def test_request_at_the_edges_is_taken() -> None:
    edge = f'[{2**63 - 1}, {-(2**63)}, 1.5e308, "\\ud83d\\ude00", "\\\\ud800"]'
    nested = "[" * 120 + "]" * 120
    assert protocol.parse_request(frame(edge)) == (
        "Query",
        [2**63 - 1, -(2**63), 1.5e308, "\U0001f600", "\\ud800"],
    )
    assert protocol.parse_request(frame(nested))[0] == "Query"


def test_lone_surrogate_in_an_answer_is_a_json_escape() -> None:
    encoded = protocol.encode_error(errors.OpPrereqError("bad \ud800", C.ECODE_INVAL))
    assert json.loads(encoded[:-1]) == {
        "success": False,
        "result": ["OpPrereqError", ["bad \ud800", C.ECODE_INVAL]],
    }


def identity(_name: str) -> Any:
    return lambda item: item


def test_filter_over_budget_is_a_clear_error() -> None:
    predicate = compile_filter(["=~", "name", "^(a|a)+$"], identity)
    with pytest.raises(errors.OpPrereqError) as caught:
        for item in ["a" * 40 + "!"] * 10:
            predicate(item)
    assert caught.value.ecode == C.ECODE_INVAL
    assert f"took more than {FILTER_BUDGET} s" in caught.value.message
    assert "'^(a|a)+$'" in caught.value.message


def test_filter_budget_counts_every_item() -> None:
    # Cheap leaves, too many of them: the budget ends the evaluation as well.
    qfilter = ["|", *(["=", "name", str(n)] for n in range(2000))]
    predicate = compile_filter(qfilter, identity)
    with pytest.raises(errors.OpPrereqError, match="its filter"):
        for _ in range(10**6):
            predicate("x")


def test_filter_nested_too_deep_is_refused() -> None:
    qfilter: list[Any] = ["?", "name"]
    for _ in range(150):
        qfilter = ["!", qfilter]
    with pytest.raises(errors.QueryFilterParseError, match="nested more than 100"):
        compile_filter(qfilter, identity)


def test_list_operator_on_a_scalar_field_is_false() -> None:
    assert compile_filter(["=[]", "id", 1], identity)(7) is False


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("((a{1000}){1000}){1000}", "repeats too much"),
        ("(a{65535}){65535}", "repeats too much"),
        ("x" * 10_001, "too long"),
        ("[a-", "Invalid regular expression"),
        ("a{99999999999999999999}", "Invalid regular expression|repeats too much"),
    ],
)
def test_regex_limits(pattern: str, text: str) -> None:
    with pytest.raises(errors.QueryFilterParseError, match=text):
        compile_regex(pattern)


def test_regex_escapes_do_not_hide_repeats() -> None:
    with pytest.raises(errors.QueryFilterParseError, match="repeats too much"):
        compile_regex(r"(\\{1000}){1000}")
    assert compile_regex(r"\{1000\}\{1000\}").search("{1000}{1000}")


def test_slow_job_rule_expression_counts_as_failed_and_is_remembered() -> None:
    pattern = "^(b|b)+$"
    assert job_filters._search(pattern, "b" * 40 + "!") is None
    assert pattern in job_filters._slow_patterns
    assert job_filters._search(pattern, "b") is None  # not tried again
    assert job_filters._search("^b+$", "bbb") is True


@pytest.mark.parametrize(
    "changes",
    [
        {"hidden_os": [["add", "../etc"]]},
        {"blacklisted_os": [["remove", "a/b"]]},
        {"blacklisted_os": [["add", "+variant"]]},
        {"osparams": {"x y": {}}},
        {"os_hvp": {"deb\n": {}}},
        {"osparams_private_cluster": {"": {}}},
    ],
)
def test_names_that_cannot_be_os_names_are_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(errors.OpPrereqError, match="is not an OS name") as caught:
        from_dict({"OP_ID": "OP_CLUSTER_SET_PARAMS", **changes})
    assert caught.value.ecode == C.ECODE_INVAL


def test_os_names_and_variants_are_taken() -> None:
    op = from_dict(
        {
            "OP_ID": "OP_CLUSTER_SET_PARAMS",
            "hidden_os": [["add", "debootstrap+buster-amd64"]],
            "osparams": {"deb_1.x": {"dhcp": "yes"}},
        }
    )
    assert op.model_dump()["hidden_os"] == [["add", "debootstrap+buster-amd64"]]
