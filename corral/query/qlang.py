"""Ganeti's query filter strings, turned into its filter lists.

The grammar is Ganeti's (``gnt-instance list 'pnode == "node1" and not admin_up'``):

- conditions: ``FIELD OP VALUE`` with ``==`` (``=``), ``!=``, ``<``, ``<=``,
  ``>``, ``>=``; ``VALUE in FIELD`` and ``VALUE not in FIELD`` (list
  contains); ``FIELD =~ m/regex/flags`` and ``!~`` (delimiters ``/ # ^ |``,
  flags ``i`` and ``s``); ``FIELD =* "glob"`` and ``!*``; a bare ``FIELD`` for
  its truth;
- values: integers and quoted strings;
- ``not``, ``and``, ``or`` (in that order of precedence) and parentheses.

``make_filter`` is Ganeti's rule for the arguments of a list command: one
argument that looks like a filter (or ``-F``) is parsed as one; other
arguments are names, or DNS-style globs (``*.site``).  Stdlib only.
"""

from __future__ import annotations

import json
import re

from corral import errors

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

# Characters that make an argument a filter, and a name a glob pattern.
FILTER_DETECTION_CHARS = frozenset("\t\n\v\f\r !\"'()/<=>\\~")
GLOB_DETECTION_CHARS = frozenset("*?")

_FIELD_RE = re.compile(r"[A-Za-z][A-Za-z0-9_/.]*")
_NUMBER_RE = re.compile(r"[-+]?\d+")
_STRING_RE = re.compile(r'"(?:[^"\\\n\r]|\\.)*"|' + r"'(?:[^'\\\n\r]|\\.)*'")
_BINARY_OPS = {"==": "==", "=": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
# Longest first, so that "<=" is not read as "<".
_OP_RE = re.compile(r"==|=~|=\*|!=|!~|!\*|<=|>=|=|<|>")
_REGEXP_DELIMITERS = "/#^|"
_REGEXP_FLAGS = frozenset("si")


def parse_filter(text: str) -> Any:
    """A filter list from ``text``; QueryFilterParseError on bad input.

    A JSON list is taken as the filter itself (Corral's extension, used for
    the predicates of job filter rules).
    """
    if text.strip().startswith("["):
        try:
            return json.loads(text)
        except ValueError as err:
            raise errors.QueryFilterParseError(f"Invalid JSON filter: {err}") from None
    return parse_filter_text(text)


def parse_filter_text(text: str) -> Any:
    """Ganeti's ParseFilter: the filter language only."""
    parser = _Parser(text)
    try:
        result = parser.expression()
        parser.skip_space()
        if parser.pos != len(text):
            raise _Error(f"unexpected text at char {parser.pos}: {text[parser.pos :]!r}")
    except _Error as err:
        raise errors.QueryFilterParseError(
            f"Failed to parse query filter '{text}': {err}"
        ) from None
    return result


def dns_glob_pattern(pattern: str) -> str:
    """A regular expression for a DNS-name glob: ``*`` and ``?`` stop at dots,
    and ``web*`` also matches ``web1.example.com``."""

    def part(match: re.Match[str]) -> str:
        text = match.group(0)
        if text == "*":
            return "[^.]*"
        if text == "?":
            return "[^.]"
        return re.escape(text)

    return "^" + re.sub(r"\*|\?|[^*?]*", part, pattern) + r"(\..*)?$"


def make_filter(
    args: list[str], force_filter: bool, namefield: str = "name", isnumeric: bool = False
) -> Any:
    """The filter of a list command's arguments, by Ganeti's rules (MakeFilter)."""
    if force_filter or (len(args) == 1 and FILTER_DETECTION_CHARS & set(args[0])):
        if len(args) != 1:
            from corral import constants as C

            raise errors.OpPrereqError(
                "Exactly one argument must be given as a filter", C.ECODE_INVAL
            )
        return parse_filter_text(args[0])
    if not args:
        return None
    return ["|", *(_name_part(namefield, arg, isnumeric) for arg in args)]


def _name_part(namefield: str, text: str, isnumeric: bool) -> list[Any]:
    if isnumeric:
        try:
            number = int(text)
        except ValueError as err:
            from corral import constants as C

            raise errors.OpPrereqError(f"Invalid job ID passed: {err}", C.ECODE_INVAL) from None
        return ["==", namefield, number]
    if GLOB_DETECTION_CHARS & set(text):
        return ["=~", namefield, dns_glob_pattern(text)]
    return ["==", namefield, text]


class _Error(Exception):
    """A syntax error at some point of the text."""


class _Parser:
    """Recursive descent over the text (regular expressions need the raw text)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def _match(self, regex: re.Pattern[str]) -> str | None:
        self.skip_space()
        found = regex.match(self.text, self.pos)
        if found is None:
            return None
        self.pos = found.end()
        return found.group(0)

    def _keyword(self, word: str) -> bool:
        self.skip_space()
        end = self.pos + len(word)
        following = self.text[end : end + 1]
        if self.text.startswith(word, self.pos) and not (following.isalnum() or following in "_/."):
            self.pos = end
            return True
        return False

    def expression(self) -> Any:
        return self._chain("or", "|", self.conjunction)

    def conjunction(self) -> Any:
        return self._chain("and", "&", self.negation)

    def _chain(self, keyword: str, op: str, operand: Any) -> Any:
        parts = [operand()]
        while self._keyword(keyword):
            parts.append(operand())
        return parts[0] if len(parts) == 1 else [op, *parts]

    def negation(self) -> Any:
        mark = self.pos
        if self._keyword("not"):
            try:
                return ["!", self.negation()]
            except _Error:
                self.pos = mark  # as Ganeti's parser: then "not" is a field name
        return self.atom()

    def atom(self) -> Any:
        self.skip_space()
        if self.text.startswith("(", self.pos):
            self.pos += 1
            inner = self.expression()
            self.skip_space()
            if not self.text.startswith(")", self.pos):
                raise _Error(f"expected ')' at char {self.pos}")
            self.pos += 1
            return inner
        start = self.pos
        value = self._value()
        if value is not None:
            return self._contains(value)
        field = self._match(_FIELD_RE)
        if field is None:
            raise _Error(f"expected a condition at char {start}")
        return self._condition(field)

    def _value(self) -> Any:
        number = self._match(_NUMBER_RE)
        if number is not None:
            return int(number)
        string = self._match(_STRING_RE)
        return string[1:-1] if string is not None else None

    def _contains(self, value: Any) -> Any:
        negated = self._keyword("not")
        if not self._keyword("in"):
            raise _Error(f"expected 'in' after a value at char {self.pos}")
        field = self._match(_FIELD_RE)
        if field is None:
            raise _Error(f"expected a field name at char {self.pos}")
        condition = ["=[]", field, value]
        return ["!", condition] if negated else condition

    def _condition(self, field: str) -> Any:
        mark = self.pos
        op = self._match(_OP_RE)
        if op is None:
            return ["?", field]
        if op in ("=~", "!~"):
            condition = ["=~", field, self._regexp()]
        elif op in ("=*", "!*"):
            string = self._match(_STRING_RE)
            if string is None:
                raise _Error(f"expected a quoted glob pattern at char {self.pos}")
            condition = ["=~", field, dns_glob_pattern(string[1:-1])]
        else:
            value = self._value()
            if value is None:
                self.pos = mark
                raise _Error(f"expected a number or a quoted string at char {self.pos}")
            return [_BINARY_OPS[op], field, value]
        return ["!", condition] if op.startswith("!") else condition

    def _regexp(self) -> str:
        self.skip_space()
        if self.text.startswith("m", self.pos):
            self.pos += 1
        if self.pos >= len(self.text) or self.text[self.pos] not in _REGEXP_DELIMITERS:
            raise _Error(f"expected a regular expression at char {self.pos}")
        delimiter, body = self.text[self.pos], []
        self.pos += 1
        while self.pos < len(self.text) and self.text[self.pos] != delimiter:
            # As Ganeti's parser: a backslash makes the next character literal
            # (and is dropped).
            if self.text[self.pos] == "\\" and self.pos + 1 < len(self.text):
                self.pos += 1
            body.append(self.text[self.pos])
            self.pos += 1
        if self.pos >= len(self.text):
            raise _Error("unterminated regular expression")
        self.pos += 1
        flags = re.compile(r"[A-Za-z]*").match(self.text, self.pos)
        assert flags is not None
        self.pos = flags.end()
        return _regexp_value("".join(body), flags.group(0))


def _regexp_value(regexp: str, flags: str) -> str:
    unknown = set(flags) - _REGEXP_FLAGS
    if unknown:
        raise _Error(f"Unknown regular expression flags: '{''.join(sorted(unknown))}'")
    text = f"(?{''.join(sorted(flags))}){regexp}" if flags else regexp
    try:
        re.compile(text)
    except re.error as err:
        raise _Error(f"Invalid regular expression ({err})") from None
    return text
