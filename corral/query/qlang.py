"""The filter strings of ``-F/--filter``, turned into Ganeti's filter lists.

Accepted: a JSON filter list as it is, or expressions such as
``status == "running" and not (pnode =~ /node2/ or "web" in tags)``.
Comparisons: ``==`` ``!=`` ``<`` ``>`` ``<=`` ``>=``, ``=~ /regex/``,
``VALUE in FIELD`` (list contains), and a bare field for its truth.
Stdlib only: the commands use it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from corral import errors

_TOKEN_RE = re.compile(
    r"""\s*(?:
        (?P<lparen>\() | (?P<rparen>\)) |
        (?P<op>==|!=|<=|>=|=~|<|>) |
        (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*') |
        (?P<regex>/(?:[^/\\]|\\.)*/) |
        (?P<number>-?\d+(?:\.\d+)?(?![\w.])) |
        (?P<word>[A-Za-z_][\w./-]*)
    )""",
    re.VERBOSE,
)
_KEYWORDS = {"and", "or", "not", "in", "true", "false"}


def parse_filter(text: str) -> Any:
    """A Ganeti filter list from ``text``; QueryFilterParseError on bad input."""
    text = text.strip()
    if text.startswith("["):
        try:
            return json.loads(text)
        except ValueError as err:
            raise errors.QueryFilterParseError(f"Invalid JSON filter: {err}") from None
    parser = _Parser(_tokenize(text))
    result = parser.expression()
    extra = parser.peek()
    if extra is not None:
        raise errors.QueryFilterParseError(f"Unexpected '{extra[1]}' in filter {text!r}")
    return result


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens = []
    pos = 0
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if match is None or match.end() == pos:
            if text[pos:].strip() == "":
                break
            raise errors.QueryFilterParseError(f"Cannot parse filter near {text[pos:]!r}")
        kind = match.lastgroup
        assert kind is not None
        tokens.append((kind, match.group(kind)))
        pos = match.end()
    return tokens


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise errors.QueryFilterParseError("Filter ends too early")
        self.pos += 1
        return token

    def _is_word(self, word: str) -> bool:
        token = self.peek()
        return token is not None and token[0] == "word" and token[1] == word

    def expression(self) -> Any:
        parts = [self.conjunction()]
        while self._is_word("or"):
            self.take()
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else ["|", *parts]

    def conjunction(self) -> Any:
        parts = [self.negation()]
        while self._is_word("and"):
            self.take()
            parts.append(self.negation())
        return parts[0] if len(parts) == 1 else ["&", *parts]

    def negation(self) -> Any:
        if self._is_word("not"):
            self.take()
            return ["!", self.negation()]
        return self.atom()

    def atom(self) -> Any:
        kind, text = self.take()
        if kind == "lparen":
            inner = self.expression()
            if self.take()[0] != "rparen":
                raise errors.QueryFilterParseError("Missing ')' in filter")
            return inner
        if kind == "word" and text not in _KEYWORDS:
            return self._comparison(text)
        value = _value(kind, text)
        if not self._is_word("in"):
            raise errors.QueryFilterParseError(f"Expected a field name, got {text!r}")
        self.take()
        field_kind, field = self.take()
        if field_kind != "word":
            raise errors.QueryFilterParseError(f"Expected a field name after 'in', got {field!r}")
        return ["=[]", field, value]

    def _comparison(self, field: str) -> Any:
        token = self.peek()
        if token is None or token[0] != "op":
            return ["?", field]
        op = self.take()[1]
        kind, text = self.take()
        if op == "=~":
            if kind != "regex":
                raise errors.QueryFilterParseError("'=~' needs a /regular expression/")
            return ["=~", field, text[1:-1].replace("\\/", "/")]
        return [op, field, _value(kind, text)]


def _value(kind: str, text: str) -> Any:
    if kind == "string":
        return json.loads(text) if text.startswith('"') else text[1:-1].replace("\\'", "'")
    if kind == "number":
        return float(text) if "." in text else int(text)
    if kind == "word" and text in ("true", "false"):
        return text == "true"
    raise errors.QueryFilterParseError(f"Expected a value, got {text!r}")
