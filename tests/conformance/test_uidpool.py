"""The uid pool against Ganeti 3.0.2: its uidpool module (parsing, formatting,
checks, additions and removals give the same results and the same errors),
its ``gnt-cluster modify``/``info`` against a Corral cluster (same output,
same refusals), and its ssconf reader on the file Corral writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from corral import errors, uidpool
from tests.conformance.ganeti import ganeti_library, run_ganeti_python
from tests.conformance.test_cluster import (  # noqa: F401 (an autouse fixture)
    ganeti_cluster,
    masked,
    same,
    same_time_zone,
)
from tests.helpers.cluster import TestCluster

PARSE = [
    "", "1000", "1000-2000", "3000,1000-2000", "1000-2000,,3000", ",", "5-3", "7-7",
    "1-2-3", "a", "1-b", "-5", "5-", " 12", "+5", "1_000", "0x10", "4294967296",
    "1000,1000", "10-20,15-25",
]  # fmt: skip
PARSE_LINES = ["1000-2000\n3000", "3000\n\n1000", "1000-2000\n", "1,2"]
FORMAT: list[list[list[int]]] = [[], [[1, 1]], [[1, 1], [2, 5]], [[0, 4294967295]], [[9, 3]]]
CHECK: list[list[list[int]]] = [
    [], [[0, 4294967295]], [[1, 1]], [[5, 3]], [[-1, 5]], [[0, 4294967296]],
    [[10, 5], [-1, 0]], [[1, 2], [4294967296, 4294967297]],
]  # fmt: skip
ADD = [
    ([[1000, 2000]], [[1000, 1010]]),
    ([[1000, 2000]], [[1000, 2000]]),
    ([], [[5, 5], [5, 5], [1, 2]]),
    ([[3000, 3000]], [[1000, 2000]]),
]
REMOVE = [
    ([[1000, 2000], [3000, 3000]], [[3000, 3000]]),
    ([[1000, 2000]], [[1000, 1500]]),
    ([[1000, 2000]], [[7, 7]]),
    ([[1, 1], [1, 1]], [[1, 1]]),
    ([[1, 1], [2, 2]], [[2, 2], [2, 2]]),
]

_GANETI = r"""
import json, sys
from ganeti import errors, uidpool

def outcome(fn, *args):
    try:
        return ["ok", fn(*args)]
    except errors.GenericError as err:
        return ["error", type(err).__name__, list(err.args)]

def add(pool, ranges):
    uidpool.AddToUidPool(pool, ranges)
    return pool

def remove(pool, ranges):
    uidpool.RemoveFromUidPool(pool, ranges)
    return pool

cases = json.load(sys.stdin)
print(json.dumps({
    "parse": [outcome(uidpool.ParseUidPool, v) for v in cases["parse"]],
    "lines": [outcome(uidpool.ParseUidPool, v, "\n") for v in cases["lines"]],
    "format": [uidpool.FormatUidPool(p) for p in cases["format"]],
    "format_lines": [uidpool.FormatUidPool(p, "\n") for p in cases["format"]],
    "check": [outcome(uidpool.CheckUidPool, p) for p in cases["check"]],
    "add": [outcome(add, p, r) for p, r in cases["add"]],
    "remove": [outcome(remove, p, r) for p, r in cases["remove"]],
}))
"""


def outcome(fn: Any, *args: Any) -> list[Any]:
    """``["ok", result]`` or ``["error", class name, args]``, as the script has them."""
    try:
        return ["ok", fn(*args)]
    except errors.GenericError as err:
        return ["error", type(err).__name__, list(err.args)]


def test_library_as_ganeti(ganeti: Path) -> None:
    cases = {
        "parse": PARSE,
        "lines": PARSE_LINES,
        "format": FORMAT,
        "check": CHECK,
        "add": ADD,
        "remove": REMOVE,
    }
    result = ganeti_library(_GANETI, stdin=json.dumps(cases))
    assert result.rc == 0, result.stderr
    theirs = json.loads(result.stdout)
    # Ganeti's checks return None: the same as ours.
    assert [outcome(uidpool.parse, v) for v in PARSE] == theirs["parse"]
    assert [outcome(uidpool.parse, v, "\n") for v in PARSE_LINES] == theirs["lines"]
    assert [uidpool.format_pool(p) for p in FORMAT] == theirs["format"]
    assert [uidpool.format_pool(p, "\n") for p in FORMAT] == theirs["format_lines"]
    assert [outcome(uidpool.check, p) for p in CHECK] == theirs["check"]
    assert [outcome(uidpool.added, p, r) for p, r in ADD] == theirs["add"]
    assert [outcome(uidpool.removed, p, r) for p, r in REMOVE] == theirs["remove"]


@pytest.fixture
def cl(gcluster: TestCluster) -> TestCluster:
    """The module's cluster (the tests change its pool, in order)."""
    return gcluster


def ganeti_ssconf_pool(cl: TestCluster) -> list[list[int]]:
    """The pool as Ganeti's ssconf reader and parser get it from the node's files."""
    code = (
        "from ganeti import ssconf, uidpool\n"
        "pool = uidpool.ParseUidPool(ssconf.SimpleStore().GetUidPool(), separator='\\n')\n"
        "print(serializer.DumpJson(pool).decode())"
    )
    result = run_ganeti_python(cl.paths.root, code)
    assert result.rc == 0, result.stderr
    pool: list[list[int]] = json.loads(result.stdout)
    return pool


def set_pool(cl: TestCluster, text: str) -> None:
    assert cl.gnt("cluster", "modify", "--uid-pool", text).rc == 0


def pool_of(cl: TestCluster) -> list[list[int]]:
    with cl.client() as client:
        pool: list[list[int]] = client.call("QueryClusterInfo")["uid_pool"]
        return pool


ADDED = [[1000, 1010], [1000, 2000], [4000, 4010]]


@pytest.mark.parametrize(
    ("start", "argv", "pool"),
    [
        ("", ["--uid-pool", "3000,1000-2000"], [[1000, 2000], [3000, 3000]]),
        ("1000-2000", ["--add-uids", "4000-4010,1000-1010"], ADDED),
        ("1000-2000", ["--add-uids", "1000-2000"], [[1000, 2000]]),
        ("1000-1010,1000-2000,3000", ["--remove-uids", "1000-1010,3000"], [[1000, 2000]]),
        ("1", ["--add-uids", "5", "--remove-uids", "5", "--uid-pool", "7-9"], [[7, 9]]),
        ("1", ["--add-uids", "5", "--remove-uids", "1,5"], []),
        ("1000", ["--uid-pool", ""], []),
        ("", ["--uid-pool", "0-4294967295"], [[0, 4294967295]]),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) and v and isinstance(v[0], str) else str(v),
)  # fmt: skip
def test_modify_and_info(
    cl: TestCluster, start: str, argv: list[str], pool: list[list[int]]
) -> None:
    """Ganeti's command, then Corral's, makes the change from the same start:
    the same output and pool; both ``info`` agree, and Ganeti's ssconf
    reader finds the pool on the node."""
    set_pool(cl, start)
    theirs = ganeti_cluster(cl, "modify", *argv)
    assert pool_of(cl) == pool, theirs
    same(cl, "info")
    set_pool(cl, start)
    ours = cl.gnt("cluster", "modify", *argv)
    assert masked(ours) == masked(theirs)
    assert pool_of(cl) == pool
    same(cl, "info")
    assert ganeti_ssconf_pool(cl) == pool


@pytest.mark.parametrize(
    "argv",
    [
        ["--uid-pool", "5-3"],
        ["--uid-pool", "0-4294967296"],
        ["--add-uids", "9-1"],
        ["--remove-uids", "7"],
        ["--remove-uids", "9-1"],
        ["--remove-uids", "100-200,7"],
        ["--add-uids", "1-2-3"],
        ["--remove-uids", "x"],
        ["--uid-pool", "1-2,5-3", "--mac-prefix", "zz"],
    ],
    ids=" ".join,
)
def test_refusals(cl: TestCluster, argv: list[str]) -> None:
    """A refused change leaves the pool, and the node's ssconf file, as it was."""
    set_pool(cl, "100-200")
    result = same(cl, "modify", *argv)
    assert result.rc != 0
    assert pool_of(cl) == [[100, 200]]
    assert cl.paths.ssconf_file("uid_pool").read_text() == "100-200\n"
