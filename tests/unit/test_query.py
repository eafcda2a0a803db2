"""Tests of the query filter language and the Query result format."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral import constants as C
from corral import errors
from corral.query.fields import NODATA, OFFLINE, UNAVAIL, Field, FieldSet, cell
from corral.query.filter import compile_filter

ITEMS: list[dict[str, Any]] = [
    {"name": "node1", "cpus": 4, "tags": ["web", "prod"], "offline": False, "ratio": 0.5},
    {"name": "node2", "cpus": 8, "tags": [], "offline": True, "ratio": 1.5},
    {"name": "other", "cpus": 16, "tags": ["db"], "offline": False, "ratio": None},
]

FIELDS = FieldSet(
    [
        Field("name", "Node", C.QFT_TEXT, "Node name", lambda r: r["name"], ("name",)),
        Field("cpus", "CPUs", C.QFT_NUMBER, "CPU count", lambda r: r["cpus"], ("cpus",)),
        Field("tags", "Tags", C.QFT_OTHER, "Tags", lambda r: r["tags"], ("tags",)),
        Field("offline", "Offline", C.QFT_BOOL, "Offline?", lambda r: r["offline"]),
        Field(
            "ratio",
            "Ratio",
            C.QFT_NUMBER_FLOAT,
            "A ratio",
            lambda r: NODATA if r["ratio"] is None else r["ratio"],
            ("ratio", "extra"),
        ),
    ]
)


def names(qfilter: Any) -> list[str]:
    result = FIELDS.query(["name"], qfilter, ITEMS)
    return [row[0][1] for row in result["data"]]


# Operators


@pytest.mark.parametrize("qfilter", [None, []])
def test_empty_filter_matches_everything(qfilter: Any) -> None:
    assert names(qfilter) == ["node1", "node2", "other"]


@pytest.mark.parametrize(
    ("qfilter", "expected"),
    [
        (["=", "name", "node2"], ["node2"]),
        (["==", "name", "node2"], ["node2"]),
        (["==", "cpus", 8], ["node2"]),
        (["==", "name", "nosuch"], []),
        (["!=", "name", "node2"], ["node1", "other"]),
        (["<", "cpus", 8], ["node1"]),
        ([">", "cpus", 8], ["other"]),
        (["<=", "cpus", 8], ["node1", "node2"]),
        ([">=", "cpus", 8], ["node2", "other"]),
        (["<", "name", "node2"], ["node1"]),
        (["=~", "name", "^node"], ["node1", "node2"]),
        (["=~", "name", "2$"], ["node2"]),
        (["=~", "cpus", "^1"], ["other"]),
        (["=[]", "tags", "prod"], ["node1"]),
        (["=[]", "tags", "nosuch"], []),
        (["?", "offline"], ["node2"]),
        (["?", "tags"], ["node1", "other"]),
        (["!", ["?", "offline"]], ["node1", "other"]),
        (["&", ["=~", "name", "^node"], [">", "cpus", 4]], ["node2"]),
        (["|", ["==", "name", "node1"], ["==", "name", "other"]], ["node1", "other"]),
        (["&"], ["node1", "node2", "other"]),
        (["|"], []),
        (
            ["|", ["&", ["==", "cpus", 4], ["=[]", "tags", "web"]], ["!", ["<", "cpus", 16]]],
            ["node1", "other"],
        ),
    ],
)
def test_operators(qfilter: list[Any], expected: list[str]) -> None:
    assert names(qfilter) == expected


def test_comparison_of_incomparable_values_is_false_not_an_error() -> None:
    assert names(["<", "cpus", "ten"]) == []
    assert names([">=", "name", 3]) == []
    # ... but "!=" between different types is simply true.
    assert names(["!=", "cpus", "ten"]) == ["node1", "node2", "other"]


def test_unavailable_values_compare_as_none() -> None:
    # "ratio" is NODATA for "other": it is neither truthy nor comparable.
    assert names(["?", "ratio"]) == ["node1", "node2"]
    assert names([">", "ratio", 0]) == ["node1", "node2"]
    assert names(["=~", "ratio", ".*"]) == ["node1", "node2", "other"]
    assert names(["=~", "ratio", "."]) == ["node1", "node2"]


@given(st.lists(st.integers(0, 20), max_size=8), st.integers(0, 20))
def test_or_of_equalities_is_membership(values: list[int], probe: int) -> None:
    pred = compile_filter(["|", *[["==", "v", v] for v in values]], lambda _name: lambda x: x)
    assert pred(probe) == (probe in values)
    negated = compile_filter(
        ["!", ["|", *[["==", "v", v] for v in values]]], lambda _n: lambda x: x
    )
    assert negated(probe) == (probe not in values)


# Bad filters


@pytest.mark.parametrize(
    "qfilter",
    [
        "name",
        {"op": "=="},
        5,
        ["&", []],
        [5, "name"],
        [None],
        ["=="],
        ["==", "name"],
        ["==", "name", "a", "b"],
        ["==", 5, "a"],
        ["==", ["name"], "a"],
        ["?"],
        ["?", "offline", "extra"],
        ["!"],
        ["!", ["?", "offline"], ["?", "offline"]],
        ["!", "offline"],
        ["&", "name"],
        ["|", ["?", "offline"], 7],
        ["=~", "name", "("],
        ["=~", "name"],
        ["=[]", "tags"],
        ["~~", "name", "x"],
        ["==", "nosuchfield", 1],
        ["?", "nosuchfield"],
        ["&", ["?", "offline"], ["==", "nosuchfield", 1]],
    ],
)
def test_bad_filters_raise_query_filter_parse_error(qfilter: Any) -> None:
    with pytest.raises(errors.QueryFilterParseError):
        FIELDS.query(["name"], qfilter, ITEMS)


def test_filter_error_messages_are_explicit() -> None:
    with pytest.raises(errors.QueryFilterParseError, match="Unknown filter operator '~~'"):
        FIELDS.query(["name"], ["~~", "name", "x"], ITEMS)
    with pytest.raises(errors.QueryFilterParseError, match="Unknown field 'nosuch'"):
        FIELDS.query(["name"], ["==", "nosuch", 1], ITEMS)
    with pytest.raises(errors.QueryFilterParseError, match="takes 2 argument"):
        FIELDS.query(["name"], ["==", "name"], ITEMS)
    with pytest.raises(errors.QueryFilterParseError, match="Invalid regular expression"):
        FIELDS.query(["name"], ["=~", "name", "[unclosed"], ITEMS)


def test_filter_errors_are_parameter_errors() -> None:
    # Ganeti's QueryFilterParseError is a ParseError; clients catch GenericError.
    assert issubclass(errors.QueryFilterParseError, errors.GenericError)


def test_bad_filter_is_rejected_even_without_items() -> None:
    with pytest.raises(errors.QueryFilterParseError):
        FIELDS.query(["name"], ["==", "nosuch", 1], [])


# Result format


def test_query_result_format() -> None:
    result = FIELDS.query(["name", "cpus", "ratio", "offline"], None, ITEMS[1:])
    assert result == {
        "fields": [
            {"name": "name", "title": "Node", "kind": "text", "doc": "Node name"},
            {"name": "cpus", "title": "CPUs", "kind": "number", "doc": "CPU count"},
            {"name": "ratio", "title": "Ratio", "kind": "float", "doc": "A ratio"},
            {"name": "offline", "title": "Offline", "kind": "bool", "doc": "Offline?"},
        ],
        "data": [
            [[0, "node2"], [0, 8], [0, 1.5], [0, True]],
            [[0, "other"], [0, 16], [C.RS_NODATA, None], [0, False]],
        ],
    }


def test_unknown_fields_have_kind_unknown_and_cells_1_null() -> None:
    result = FIELDS.query(["name", "bogus", "cpus"], ["==", "name", "node1"], ITEMS)
    assert result["fields"][1] == {
        "name": "bogus",
        "title": "bogus",
        "kind": "unknown",
        "doc": "Unknown field 'bogus'",
    }
    assert result["data"] == [[[0, "node1"], [1, None], [0, 4]]]


def test_fields_keep_the_requested_order_and_duplicates() -> None:
    result = FIELDS.query(["cpus", "name", "cpus"], ["==", "cpus", 4], ITEMS)
    assert [f["name"] for f in result["fields"]] == ["cpus", "name", "cpus"]
    assert result["data"] == [[[0, 4], [0, "node1"], [0, 4]]]


def test_query_with_no_fields_gives_empty_rows() -> None:
    result = FIELDS.query([], None, ITEMS)
    # Every row has as many cells as there are field definitions.
    assert result["fields"] == []
    assert result["data"] == [[], [], []]


@pytest.mark.parametrize("wanted", [None, []])
def test_definitions_of_all_fields_are_sorted_by_name(wanted: Any) -> None:
    assert [d["name"] for d in FIELDS.definitions(wanted)] == [
        "cpus",
        "name",
        "offline",
        "ratio",
        "tags",
    ]


def test_definitions_of_selected_fields() -> None:
    assert FIELDS.definitions(["tags", "x"]) == [
        {"name": "tags", "title": "Tags", "kind": "other", "doc": "Tags"},
        {"name": "x", "title": "x", "kind": "unknown", "doc": "Unknown field 'x'"},
    ]


def test_needs_collects_what_the_fields_need() -> None:
    assert FIELDS.needs(["name", "ratio", "offline", "unknown"]) == {"name", "ratio", "extra"}
    assert FIELDS.needs([]) == set()


def test_cell_statuses() -> None:
    assert cell(5) == [C.RS_NORMAL, 5]
    assert cell(None) == [C.RS_NORMAL, None]
    assert cell(NODATA) == [C.RS_NODATA, None]
    assert cell(UNAVAIL) == [C.RS_UNAVAIL, None]
    assert cell(OFFLINE) == [C.RS_OFFLINE, None]
