"""Decoding the filter-rule calls' arguments as luxid does: values, normal
forms and the texts of its readers."""

from __future__ import annotations

from typing import Any

import pytest

from corral.jobs.filter_decode import (
    DecodeError,
    compact,
    delete_filter_args,
    normalise_action,
    normalise_filter,
    normalise_predicate,
    pretty,
    query_filters_args,
    replace_filter_args,
)
from corral.luxi.protocol import UndecodableArguments

# Normal forms


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        (None, None),
        (["=", "id", 5], ["==", "id", 5]),
        (["==", "OP_ID", "OP_TEST_DELAY"], ["==", "OP_ID", "OP_TEST_DELAY"]),
        (["!=", "id", 5], ["!", ["==", "id", 5]]),
        (["<", "id", 5.0], ["<", "id", 5]),
        (["&", ["?", "on_master"], ["|"]], ["&", ["?", "on_master"], ["|"]]),
        (["!", None], ["!", None]),
        (["=~", "reason", "^pink"], ["=~", "reason", "^pink"]),
        (["=[]", "on_nodes", "node1"], ["=[]", "on_nodes", "node1"]),
        ([">=", "timestamp", 10**20], [">=", "timestamp", 10**20]),
    ],
)
def test_filters_come_back_as_luxid_writes_them(given: Any, stored: Any) -> None:
    assert normalise_filter(given) == stored


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("id", 'Cannot deserialise filter: expected array [string, args], got "id"'),
        ([], "Cannot deserialise filter: expected array [string, args], got []"),
        ([5, "id"], 'Cannot deserialise filter: expected array [string, args], got [5, "id"]'),
        (["~", "id", 1], "Unknown filter operand '~'"),
        (
            ["==", "id"],
            'Cannot deserialise field/value pair, expected [fieldname, value] but got ["id"]',
        ),
        (["==", 5, 5], "Unable to read String"),
        (
            ["==", "id", True],
            "Cannot deserialise filter value, expecting string or integer, got true",
        ),
        (
            ["==", "id", None],
            "Cannot deserialise filter value, expecting string or integer, got null",
        ),
        (
            ["==", "id", [1]],
            "Cannot deserialise filter value, expecting string or integer, got [1]",
        ),
        (
            ["==", "id", 1.5],
            "Cannot deserialise numeric filter value, expecting integral but got a fractional"
            " value: 3 % 2",
        ),
        (
            ["!", ["?", "a"], ["?", "b"]],
            'Cannot deserialise field, expected [filter] but got [["?", "a"], ["?", "b"]]',
        ),
        (["?"], "Cannot deserialise field, expected [fieldname] but got []"),
        (["=~", "OP_ID", "("], "Invalid regular expression '('"),
        (
            ["&", ["==", "id", 1], ["<", "id", False]],
            "Cannot deserialise filter value, expecting string or integer, got false",
        ),
    ],
)
def test_bad_filters_get_luxids_messages(given: Any, message: str) -> None:
    with pytest.raises(DecodeError) as err:
        normalise_filter(given)
    assert str(err.value).startswith(message)


def test_predicates_and_their_errors() -> None:
    given: Any
    assert normalise_predicate(["jobid", [">", "id", "watermark"]]) == [
        "jobid",
        [">", "id", "watermark"],
    ]
    assert normalise_predicate(["reason", None]) == ["reason", None]
    bad_params = "malformed FilterPredicate: bad parameter list for '{}' predicate: {}"
    for given, name, params in (
        (["jobid"], "jobid", "[]"),
        (["opcode", ["?", "a"], 1], "opcode", '[["?","a"],1]'),
        (["color", ["?", "a"]], "color", '[["?","a"]]'),
        (["JOBID", None], "JOBID", "[null]"),
    ):
        with pytest.raises(DecodeError, match=r"^malformed FilterPredicate: bad") as err:
            normalise_predicate(given)
        assert str(err.value) == bad_params.format(name, params)
    for given in ("jobid", [], [1, None], {"jobid": None}):
        with pytest.raises(DecodeError) as err:
            normalise_predicate(given)
        assert str(err.value) == (
            "malformed FilterPredicate: must be a list with the first entry being a string"
            " describing the predicate type"
        )


def test_actions() -> None:
    bad: Any
    for action in ("ACCEPT", "PAUSE", "REJECT", "CONTINUE"):
        assert normalise_action(action) == action
    assert normalise_action(["RATE_LIMIT", 3]) == ["RATE_LIMIT", 3]
    assert normalise_action(["RATE_LIMIT", 2.0]) == ["RATE_LIMIT", 2]
    for bad in (["RATE_LIMIT", 0], ["RATE_LIMIT", -1], ["RATE_LIMIT", 1.5], ["RATE_LIMIT", "2"]):
        with pytest.raises(DecodeError, match=r"^RATE_LIMIT argument must be a positive integer$"):
            normalise_action(bad)
    for bad, shown in (
        ("accept", '"accept"'),
        ("RATE_LIMIT 2", '"RATE_LIMIT 2"'),
        (["PAUSE"], '["PAUSE"]'),
        (None, "null"),
        ({"a": 1}, '{"a":1}'),
    ):
        with pytest.raises(DecodeError) as err:
            normalise_action(bad)
        assert str(err.value) == f"malformed FilterAction JSON: {shown}"
    with pytest.raises(DecodeError, match="positive integer"):
        normalise_action(["RATE_LIMIT", 1, 2])


# Whole calls


def test_replace_filter_arguments() -> None:
    args = [None, 3, [["jobid", ["=", "id", 4]]], ["RATE_LIMIT", 2], [["gnt:user", "x", 7]]]
    assert replace_filter_args(args) == (
        None,
        3,
        [["jobid", ["==", "id", 4]]],
        ["RATE_LIMIT", 2],
        [["gnt:user", "x", 7]],
    )
    uuid = "0f0e3ab7-62cf-4d7a-8a7c-2d7ff1a1b25e"
    assert replace_filter_args([uuid, 0.6, [], "ACCEPT", []])[:2] == (uuid, 1)
    assert replace_filter_args([None, 0, [], "ACCEPT", [["s", "r", 1.4]]])[4] == [["s", "r", 1]]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ([None, 0, [], "ACCEPT"], "Unable to read Tuple5"),
        ({"uuid": None}, "Unable to read Tuple5"),
        ([5, 0, [], "ACCEPT", []], "Unable to read String"),
        ([None, -1, [], "ACCEPT", []], "Invalid value for non-negative type '-1'"),
        ([None, "0", [], "ACCEPT", []], "Unable to read Int"),
        ([None, True, [], "ACCEPT", []], "Unable to read Int"),
        ([None, 0, "jobid", "ACCEPT", []], "Unable to read List"),
        ([None, 0, [], "accept", []], 'malformed FilterAction JSON: "accept"'),
        ([None, 0, [], "ACCEPT", "why"], "Unable to read List"),
        ([None, 0, [], "ACCEPT", [["a", "b"]]], "Unable to read Triple"),
        ([None, 0, [], "ACCEPT", [["a", 1, 2]]], "Unable to read String"),
        ([None, 0, [], "ACCEPT", [["a", "b", "c"]]], "Unable to read Integer"),
        # The first value luxid cannot read is the one reported.
        ([7, -1, "x", "y", "z"], "Unable to read String"),
        ([None, 0, [["jobid"]], "FOO", []], "malformed FilterPredicate"),
    ],
)
def test_replace_filter_bad_arguments(args: Any, error: str) -> None:
    with pytest.raises(UndecodableArguments) as err:
        replace_filter_args(args)
    assert err.value.message.startswith(f"Cannot convert value '{pretty(args)}', error: {error}")


def test_delete_and_query_arguments() -> None:
    args: Any
    assert delete_filter_args(["abc"]) == "abc"
    assert query_filters_args([None, ["uuid"]]) == ([], ["uuid"])
    assert query_filters_args([["a", "b"], []]) == (["a", "b"], [])
    for args, message in (
        ("abc", "Cannot convert value '\"abc\"', error: Unable to read List"),
        ([5], "Cannot convert value '[5]', error: Unable to read String"),
        (["a", "b"], "DeleteFilter takes 1 argument, got 2"),
        ([], "DeleteFilter takes 1 argument, got 0"),
    ):
        with pytest.raises(UndecodableArguments) as err:
            delete_filter_args(args)
        assert err.value.message == message
    for args, message in (
        ([None], "Cannot convert value '[null]', error: Unable to read Pair"),
        ([None, "uuid"], "Cannot convert value '[null, \"uuid\"]', error: Unable to read List"),
        (["a", []], "Cannot convert value '\"a\"', error: Unable to read List"),
        ([[1], []], "Cannot convert value '[1]', error: Unable to read String"),
    ):
        with pytest.raises(UndecodableArguments) as err:
            query_filters_args(args)
        assert err.value.message == message


# How values are shown in messages


def test_values_are_shown_as_luxid_shows_them() -> None:
    assert pretty([None, True, 0, -3, 2.0, "x", [], {}]) == '[null, true, 0, -3, 2, "x", [], {}]'
    assert pretty({"a": [1, "b"]}) == '{"a": [1, "b"]}'
    assert pretty('q"\\\x01\n') == '"q\\"\\\\\\u0001\\u000a"'
    # Haskell's doubles: plain from 0.1 to 10^7, scientific outside.
    assert [pretty(x) for x in (1.5, 0.1, 0.01, 1.25e-5, 12345678.5, -0.5)] == [
        "1.5",
        "0.1",
        "1.0e-2",
        "1.25e-5",
        "1.23456785e7",
        "-0.5",
    ]
    assert compact([None, 1, "a\n", {"k": [2.5]}]) == '[null,1,"a\\n",{"k":[2.5]}]'
