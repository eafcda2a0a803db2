"""Bad input to the filter-rule calls and gnt-filter: luxid's error for each,
and nothing changed (no rule, no job, the same configuration serial)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from corral import constants as C
from corral import errors
from tests.helpers.cluster import Result, TestCluster, running_cluster
from tests.helpers.jobs import RawLuxi, cluster_state

GOOD_UUID = "5f1f9d2e-3c44-4f4c-9a0e-6f0d8a1b2c3d"


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("filters-bad")) as cluster:
        with cluster.client() as client:
            # One rule present, so that "nothing changed" covers changing it.
            client.call("ReplaceFilter", GOOD_UUID, 1, [], "PAUSE", [["gnt:user", "kept", 1]])
        yield cluster


def state(cl: TestCluster) -> dict[str, Any]:
    with cl.client() as client:
        rules = client.call("QueryFilters", None, ["uuid", "priority", "action", "reason_trail"])
    return {**cluster_state(cl), "rules": rules}


@pytest.fixture
def unchanged(cl: TestCluster) -> Iterator[None]:
    before = state(cl)
    yield
    assert state(cl) == before


def call(cl: TestCluster, method: str, args: Any) -> Any:
    """The raw answer to one request: ``[success, result]``."""
    with RawLuxi(cl.paths.master_socket) as raw:
        answer = json.loads(
            raw.exchange(json.dumps({"method": method, "args": args}).encode() + b"\x03")
        )
    return [answer["success"], answer["result"]]


def unparsable(value: str, error: str) -> list[Any]:
    return [False, f"Failed to parse request: Cannot convert value '{value}', error: {error}"]


BAD_REPLACE = [
    pytest.param(
        [None, 0, [], "PAUSE"],
        unparsable('[null, 0, [], "PAUSE"]', "Unable to read Tuple5"),
        id="four-args",
    ),
    pytest.param(
        [None, -2, [], "PAUSE", []],
        unparsable('[null, -2, [], "PAUSE", []]', "Invalid value for non-negative type '-2'"),
        id="negative-priority",
    ),
    pytest.param(
        [None, "high", [], "PAUSE", []],
        unparsable('[null, "high", [], "PAUSE", []]', "Unable to read Int"),
        id="priority-string",
    ),
    pytest.param(
        [17, 0, [], "PAUSE", []],
        unparsable('[17, 0, [], "PAUSE", []]', "Unable to read String"),
        id="uuid-number",
    ),
    pytest.param(
        [None, 0, [], "pause", []],
        unparsable('[null, 0, [], "pause", []]', 'malformed FilterAction JSON: "pause"'),
        id="action-lower-case",
    ),
    pytest.param(
        [None, 0, [], ["RATE_LIMIT", 0], []],
        unparsable(
            '[null, 0, [], ["RATE_LIMIT", 0], []]', "RATE_LIMIT argument must be a positive integer"
        ),
        id="rate-limit-zero",
    ),
    pytest.param(
        [None, 0, [["jobs", None]], "PAUSE", []],
        unparsable(
            '[null, 0, [["jobs", null]], "PAUSE", []]',
            "malformed FilterPredicate: bad parameter list for 'jobs' predicate: [null]",
        ),
        id="unknown-predicate",
    ),
    pytest.param(
        [None, 0, [[None]], "PAUSE", []],
        unparsable(
            '[null, 0, [[null]], "PAUSE", []]',
            "malformed FilterPredicate: must be a list with the first entry being a string"
            " describing the predicate type",
        ),
        id="predicate-not-named",
    ),
    pytest.param(
        [None, 0, [["jobid", ["~", "id", 1]]], "PAUSE", []],
        unparsable(
            '[null, 0, [["jobid", ["~", "id", 1]]], "PAUSE", []]', "Unknown filter operand '~'"
        ),
        id="bad-operator",
    ),
    pytest.param(
        [None, 0, [["jobid", [">", "id", 1.5]]], "PAUSE", []],
        unparsable(
            '[null, 0, [["jobid", [">", "id", 1.5]]], "PAUSE", []]',
            "Cannot deserialise numeric filter value, expecting integral but got a fractional"
            " value: 3 % 2",
        ),
        id="fractional-value",
    ),
    pytest.param(
        [None, 0, "jobid", "PAUSE", []],
        unparsable('[null, 0, "jobid", "PAUSE", []]', "Unable to read List"),
        id="predicates-not-list",
    ),
    pytest.param(
        [None, 0, [], "PAUSE", [["gnt:user", "why"]]],
        unparsable('[null, 0, [], "PAUSE", [["gnt:user", "why"]]]', "Unable to read Triple"),
        id="short-reason",
    ),
]


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize(("args", "answer"), BAD_REPLACE)
def test_replace_filter_refuses_what_luxid_cannot_read(
    cl: TestCluster, args: Any, answer: Any
) -> None:
    assert call(cl, "ReplaceFilter", args) == answer


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize("uuid", ["not-a-uuid", GOOD_UUID.upper(), GOOD_UUID + "0", ""])
def test_replace_filter_needs_a_uuid_as_luxid_writes_them(cl: TestCluster, uuid: str) -> None:
    assert call(cl, "ReplaceFilter", [uuid, 0, [], "ACCEPT", []]) == [
        False,
        ["GenericError", ["Unable to parse UUID"]],
    ]


@pytest.mark.usefixtures("unchanged")
def test_delete_filter_bad_input(cl: TestCluster) -> None:
    unknown = "00000000-0000-4000-8000-000000000000"
    assert call(cl, "DeleteFilter", [unknown]) == [
        False,
        ["GenericError", [f"Filter rule with UUID {unknown} does not exist"]],
    ]
    assert call(cl, "DeleteFilter", [5]) == unparsable("[5]", "Unable to read String")
    assert call(cl, "DeleteFilter", GOOD_UUID) == unparsable(
        f'"{GOOD_UUID}"', "Unable to read List"
    )
    assert call(cl, "DeleteFilter", []) == [
        False,
        "Failed to parse request: DeleteFilter takes 1 argument, got 0",
    ]


@pytest.mark.usefixtures("unchanged")
def test_query_filters_bad_input(cl: TestCluster) -> None:
    assert call(cl, "QueryFilters", [None, ["uuid", "colour", "size"]]) == [
        False,
        ["OpPrereqError", ["Unknown output fields selected: colour, size", C.ECODE_INVAL]],
    ]
    assert call(cl, "QueryFilters", [GOOD_UUID, ["uuid"]]) == unparsable(
        f'"{GOOD_UUID}"', "Unable to read List"
    )
    assert call(cl, "QueryFilters", [None]) == unparsable("[null]", "Unable to read Pair")
    # Unknown uuids are no error: they select nothing.
    assert call(cl, "QueryFilters", [["nope"], ["uuid"]]) == [True, []]
    with cl.client() as client, pytest.raises(errors.QueryFilterParseError):
        client.query(C.QR_FILTER, ["uuid"], ["==", "colour", "red"])


def failed(result: Result, text: str) -> None:
    assert (result.rc, result.stdout) == (1, ""), result
    assert result.stderr == text, result.stderr


@pytest.mark.usefixtures("unchanged")
def test_gnt_filter_bad_input(cl: TestCluster) -> None:
    unknown = "00000000-0000-4000-8000-000000000000"
    failed(
        cl.gnt("filter", "delete", unknown),
        f"Unhandled Ganeti error: Filter rule with UUID {unknown} does not exist\n",
    )
    failed(
        cl.gnt("filter", "replace", "rule-one"), "Unhandled Ganeti error: Unable to parse UUID\n"
    )
    cases = [
        (["--action", "DROP"], '[null, 0, [], "DROP", []]', 'malformed FilterAction JSON: "DROP"'),
        (
            ["--priority", "-1", "--action", "RATE_LIMIT 0"],
            '[null, -1, [], ["RATE_LIMIT", 0], []]',
            "Invalid value for non-negative type '-1'",
        ),
        (
            ["--predicates", '[["opcode", ["=", "OP_ID"]]]'],
            '[null, 0, [["opcode", ["=", "OP_ID"]]], "CONTINUE", []]',
            'Cannot deserialise field/value pair, expected [fieldname, value] but got ["OP_ID"]',
        ),
    ]
    for options, value, error in cases:
        failed(
            cl.gnt("filter", "add", *options),
            "Unhandled protocol error while talking to the master daemon:\n"
            f"Failed to parse request: Cannot convert value '{value}', error: {error}\n",
        )
    failed(cl.gnt("filter", "delete"), "Error: Command delete expects 1 argument(s)\n")
    failed(
        cl.gnt("filter", "replace", GOOD_UUID, GOOD_UUID),
        "Error: Command replace expects 1 argument(s)\n",
    )
    failed(cl.gnt("filter", "add", GOOD_UUID), "Error: Command add expects no arguments\n")
    for option, value, text in (
        ("--predicates", "[jobid", "invalid JSON value"),
        ("--priority", "high", "invalid integer value: 'high'"),
    ):
        result = cl.gnt("filter", "add", option, value)
        # A bad option value exits 2, as optparse (Ganeti's tools) does.
        assert result.rc == 2 and text in result.stderr.splitlines()[-1], result
