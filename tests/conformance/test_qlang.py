"""Corral's filter language parser against Ganeti 3.0.2's (``qlang``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from corral import errors
from corral.query.qlang import make_filter, parse_filter_text
from tests.conformance.ganeti import ganeti_library

EXPRESSIONS = [
    'name == "web1"',
    "name = 'web1'",
    'status != "running" and admin_up',
    "not admin_up",
    "not not admin_up",
    'pnode == "n1" or pnode == "n2" or pnode == "n3"',
    "a and b or c and not d",
    "(a or b) and (c or not (d and e))",
    "be/vcpus >= 2 and be/maxmem < 1024",
    "disk.count <= -1",
    "oper_ram > +5",
    '"web" in tags',
    '"web" not in tags',
    "name =~ m/^web[0-9]+$/i",
    "name =~ /a\\/b/",
    "name =~ #x|y#s",
    "name =~ ^\\d+^",
    "name !~ |abc|",
    'name =* "*.example.com"',
    'name !* "web?.site"',
    "nic.ip/0 == '10.0.0.1'",
    "  spaced   ==   'x'  ",
    "tags",
    "and",
    "not",
    "not and",
]
BAD = [
    "",
    "name ==",
    "== 'x'",
    "name == x",
    "(a",
    "a b",
    "name =~ /x/q",
    "name =~ /(/",
    "'x' in",
]
ARGS = [
    (["web1", "web2"], False),
    (["*.site", "db?"], False),
    (['name == "x"'], False),
    (["name"], True),
    ([], False),
]

_GANETI = r"""
import json, sys
from ganeti import qlang, errors
out = []
for text in json.loads(sys.stdin.read())["texts"]:
    try:
        out.append({"ok": qlang.ParseFilter(text)})
    except errors.QueryFilterParseError:
        out.append({"error": True})
print(json.dumps(out))
"""


def ganeti_parse(texts: list[str]) -> list[dict[str, Any]]:
    result = ganeti_library(_GANETI, stdin=json.dumps({"texts": texts}))
    assert result.rc == 0, result.stderr
    answers: list[dict[str, Any]] = json.loads(result.stdout)
    return answers


def test_the_same_filters(ganeti: Path) -> None:
    for text, theirs in zip(EXPRESSIONS, ganeti_parse(EXPRESSIONS), strict=True):
        assert "ok" in theirs, text
        assert parse_filter_text(text) == theirs["ok"], text


def test_the_same_refusals(ganeti: Path) -> None:
    for text, theirs in zip(BAD, ganeti_parse(BAD), strict=True):
        assert theirs == {"error": True}, text
        with pytest.raises(errors.QueryFilterParseError, match="Failed to parse query filter"):
            parse_filter_text(text)


def test_list_arguments_make_the_same_filter(ganeti: Path) -> None:
    code = (
        "import json, sys\nfrom ganeti import qlang\n"
        "print(json.dumps([qlang.MakeFilter(a, f) for a, f in json.load(sys.stdin)]))"
    )
    result = ganeti_library(code, stdin=json.dumps(ARGS))
    assert result.rc == 0, result.stderr
    for (args, force), theirs in zip(ARGS, json.loads(result.stdout), strict=True):
        assert make_filter(args, force) == theirs, args
