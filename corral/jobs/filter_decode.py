"""The arguments of luxid's filter-rule calls, decoded as luxid decodes them.

luxid reads ``ReplaceFilter``, ``DeleteFilter`` and ``QueryFilters`` into
typed values and answers a request it cannot read with a plain "Failed to
parse request" string; the texts here are the ones its JSON readers give
(``Cannot convert value '...', error: ...``).  The values come back in the
form luxid stores and shows them: query-language filters re-serialised
(``=`` becomes ``==``, ``!=`` becomes ``["!", ["==", ...]]``, integral numbers
become integers).
"""

from __future__ import annotations

import json
import unicodedata
from fractions import Fraction
from typing import Any

from corral import errors
from corral.luxi.protocol import UndecodableArguments
from corral.opcodes.test import haskell_double
from corral.query.filter import compile_regex

ACTIONS = ("ACCEPT", "PAUSE", "REJECT", "CONTINUE")
RATE_LIMIT = "RATE_LIMIT"
PREDICATES = ("jobid", "opcode", "reason")

_LOGIC = ("&", "|")
_COMPARISONS = {"==": "==", "=": "==", "<": "<", ">": ">", "<=": "<=", ">=": ">=", "=[]": "=[]"}


class DecodeError(Exception):
    """A value does not have the type luxid reads; the message is its reader's."""


def _number(value: Any) -> Fraction | None:
    """The exact value of a JSON number (None for anything else, booleans too)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    # From the shortest decimal form, as luxid reads the number from the JSON text.
    return Fraction(value) if isinstance(value, int) else Fraction(repr(value))


def _int(value: Any, what: str = "Int") -> int:
    number = _number(value)
    if number is None:
        raise DecodeError(f"Unable to read {what}")
    return round(number)


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise DecodeError("Unable to read String")
    return value


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise DecodeError("Unable to read List")
    return value


# Rendering of values inside messages
def _show_number(number: Fraction) -> str:
    """A number as luxid writes it: an integer, else a Haskell Double."""
    return str(number.numerator) if number.denominator == 1 else haskell_double(float(number))


def _pretty_string(text: str) -> str:
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif unicodedata.category(char) == "Cc":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def pretty(value: Any) -> str:
    """A value as luxid's messages show it (``pp_value``, on one line)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    number = _number(value)
    if number is not None:
        return _show_number(number)
    if isinstance(value, str):
        return _pretty_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(pretty(item) for item in value) + "]"
    if isinstance(value, dict):
        fields = (f"{_pretty_string(str(k))}: {pretty(v)}" for k, v in value.items())
        return "{" + ", ".join(fields) + "}"
    return _pretty_string(str(value))


def compact(value: Any) -> str:
    """A value as luxid's JSON encoder writes it (``showJSValue``)."""
    number = _number(value)
    if number is not None:
        return _show_number(number)
    if isinstance(value, list):
        return "[" + ",".join(compact(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{compact(str(k))}:{compact(v)}" for k, v in value.items()) + "}"
    return json.dumps(value, ensure_ascii=False)


def _converting(args: Any, decode: Any) -> Any:
    """luxid's ``fromJVal``: a reader's failure quoting the whole value."""
    try:
        return decode(args)
    except DecodeError as err:
        raise UndecodableArguments(f"Cannot convert value '{pretty(args)}', error: {err}") from None


# Query-language filters
def _filter_value(value: Any) -> str | int:
    if isinstance(value, str):
        return value
    number = _number(value)
    if number is None:
        raise DecodeError(
            f"Cannot deserialise filter value, expecting string or integer, got {pretty(value)}"
        )
    if number.denominator != 1:
        raise DecodeError(
            "Cannot deserialise numeric filter value, expecting integral but got a"
            f" fractional value: {number.numerator} % {number.denominator}"
        )
    return number.numerator


def _regex(value: Any) -> str:
    pattern = _string(value)
    try:
        compile_regex(pattern)  # the engine and limits the rules are evaluated with
    except errors.QueryFilterParseError as err:
        raise DecodeError(err.message) from None
    return pattern


def _field_value(op: str, args: list[Any], read_value: Any) -> list[Any]:
    if len(args) != 2:
        raise DecodeError(
            "Cannot deserialise field/value pair, expected [fieldname, value] but got"
            f" {pretty(args)}"
        )
    return [op, _string(args[0]), read_value(args[1])]


def normalise_filter(node: Any) -> Any:
    """A query-language filter as luxid reads and re-serialises it."""
    if node is None:
        return None
    if not isinstance(node, list) or not node or not isinstance(node[0], str):
        raise DecodeError(
            f"Cannot deserialise filter: expected array [string, args], got {pretty(node)}"
        )
    op, args = node[0], node[1:]
    if op in _LOGIC:
        return [op, *(normalise_filter(arg) for arg in args)]
    if op == "!":
        if len(args) != 1:
            raise DecodeError(f"Cannot deserialise field, expected [filter] but got {pretty(args)}")
        return ["!", normalise_filter(args[0])]
    if op == "?":
        if len(args) != 1:
            raise DecodeError(
                f"Cannot deserialise field, expected [fieldname] but got {pretty(args)}"
            )
        return ["?", _string(args[0])]
    if op == "!=":
        return ["!", _field_value("==", args, _filter_value)]
    if op in _COMPARISONS:
        return _field_value(_COMPARISONS[op], args, _filter_value)
    if op == "=~":
        return _field_value("=~", args, _regex)
    raise DecodeError(f"Unknown filter operand '{op}'")


# Rule parts
def normalise_predicate(value: Any) -> list[Any]:
    """One predicate, ``[name, filter]``, as luxid reads it."""
    if isinstance(value, list) and value and isinstance(value[0], str):
        name, params = value[0], value[1:]
        if name in PREDICATES and len(params) == 1:
            return [name, normalise_filter(params[0])]
        raise DecodeError(
            f"malformed FilterPredicate: bad parameter list for '{name}' predicate:"
            f" {compact(params)}"
        )
    raise DecodeError(
        "malformed FilterPredicate: must be a list with the first entry being a string"
        " describing the predicate type"
    )


def normalise_action(value: Any) -> str | list[Any]:
    """An action: one of ACTIONS (case matters), or ``["RATE_LIMIT", n]`` with n > 0."""
    if isinstance(value, str) and value in ACTIONS:
        return value
    if isinstance(value, list) and value and value[0] == RATE_LIMIT:
        number = _number(value[1]) if len(value) == 2 else None
        if number is None or number.denominator != 1 or number <= 0:
            raise DecodeError("RATE_LIMIT argument must be a positive integer")
        return [RATE_LIMIT, number.numerator]
    raise DecodeError(f"malformed FilterAction JSON: {compact(value)}")


def _priority(value: Any) -> int:
    priority = _int(value)
    if priority < 0:
        raise DecodeError(f"Invalid value for non-negative type '{priority}'")
    return priority


def _reason_entry(value: Any) -> list[Any]:
    if not isinstance(value, list) or len(value) != 3:
        raise DecodeError("Unable to read Triple")
    return [_string(value[0]), _string(value[1]), _int(value[2], "Integer")]


def _replace_args(args: Any) -> tuple[str | None, int, list[Any], Any, list[list[Any]]]:
    if not isinstance(args, list) or len(args) != 5:
        raise DecodeError("Unable to read Tuple5")
    uuid, priority, predicates, action, reason = args
    # In this order: the first value luxid cannot read is the one it reports.
    return (
        None if uuid is None else _string(uuid),
        _priority(priority),
        [normalise_predicate(p) for p in _list(predicates)],
        normalise_action(action),
        [_reason_entry(entry) for entry in _list(reason)],
    )


def replace_filter_args(args: Any) -> tuple[str | None, int, list[Any], Any, list[list[Any]]]:
    """``ReplaceFilter``'s (uuid or None, priority, predicates, action, reason trail)."""
    decoded: tuple[str | None, int, list[Any], Any, list[list[Any]]]
    decoded = _converting(args, _replace_args)
    return decoded


def delete_filter_args(args: Any) -> str:
    """``DeleteFilter``'s uuid."""
    values: list[str] = _converting(args, lambda v: [_string(item) for item in _list(v)])
    if len(values) != 1:
        raise UndecodableArguments(f"DeleteFilter takes 1 argument, got {len(values)}")
    return values[0]


def _query_args(args: Any) -> tuple[Any, list[str]]:
    if not isinstance(args, list) or len(args) != 2:
        raise DecodeError("Unable to read Pair")
    return args[0], [_string(name) for name in _list(args[1])]


def query_filters_args(args: Any) -> tuple[list[str], list[str]]:
    """``QueryFilters``'s (uuids, fields); null uuids mean all rules."""
    uuids, fields = _converting(args, _query_args)
    if uuids is None:
        return [], fields
    names: list[str] = _converting(uuids, lambda v: [_string(item) for item in _list(v)])
    return names, fields
