"""Ganeti's query filter language: prefix lists such as ``["&", ["=", "name", "x"]]``.

Operators: ``|`` ``&`` ``!`` (logic), ``?`` (truth of a field), ``=`` ``==``
``!=`` ``<`` ``>`` ``<=`` ``>=`` (comparison), ``=~`` (regular expression) and
``=[]`` (list contains).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable

from corral import errors

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

    Predicate = Callable[[Any], bool]
    ValueOf = Callable[[str], Callable[[Any], Any]]

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
    "<=": operator.le,
    ">=": operator.ge,
}


def compile_filter(qfilter: Any, value_of: ValueOf) -> Predicate:
    """Turn a filter into a predicate; ``None`` or ``[]`` matches everything."""
    if qfilter is None or qfilter == []:
        return lambda item: True
    return _compile(qfilter, value_of)


def _compile(node: Any, value_of: ValueOf) -> Predicate:
    if not isinstance(node, list) or not node or not isinstance(node[0], str):
        raise errors.QueryFilterParseError(f"Invalid filter expression {node!r}")
    op, args = node[0], node[1:]
    if op in ("|", "&"):
        parts = [_compile(arg, value_of) for arg in args]
        combine = any if op == "|" else all
        return lambda item: combine(p(item) for p in parts)
    if op == "!":
        _arity(node, 1)
        inner = _compile(args[0], value_of)
        return lambda item: not inner(item)
    if op == "?":
        _arity(node, 1)
        get = value_of(_field_name(args[0]))
        return lambda item: bool(get(item))
    if op in _COMPARE:
        return _comparison(node, value_of, _COMPARE[op])
    if op == "=~":
        _arity(node, 2)
        get = value_of(_field_name(args[0]))
        try:
            regex = re.compile(str(args[1]))
        except re.error as err:
            raise errors.QueryFilterParseError(
                f"Invalid regular expression {args[1]!r}: {err}"
            ) from None
        return lambda item: (
            regex.search(str(get(item) if get(item) is not None else "")) is not None
        )
    if op == "=[]":
        _arity(node, 2)
        get = value_of(_field_name(args[0]))
        wanted = args[1]
        return lambda item: wanted in (get(item) or [])
    raise errors.QueryFilterParseError(f"Unknown filter operator {op!r}")


def _comparison(
    node: list[Any], value_of: ValueOf, compare: Callable[[Any, Any], bool]
) -> Predicate:
    _arity(node, 2)
    get = value_of(_field_name(node[1]))
    wanted = node[2]

    def predicate(item: Any) -> bool:
        try:
            return compare(get(item), wanted)
        except TypeError:
            return False

    return predicate


def filter_fields(qfilter: Any) -> list[str]:
    """The field names a filter mentions (to load only what is needed)."""
    out: list[str] = []
    if isinstance(qfilter, list) and qfilter and isinstance(qfilter[0], str):
        if qfilter[0] in ("|", "&", "!"):
            for arg in qfilter[1:]:
                out.extend(filter_fields(arg))
        elif len(qfilter) > 1 and isinstance(qfilter[1], str):
            out.append(qfilter[1])
    return out


def _arity(node: list[Any], count: int) -> None:
    if len(node) != count + 1:
        raise errors.QueryFilterParseError(
            f"Operator {node[0]!r} takes {count} argument(s), got {len(node) - 1}"
        )


def _field_name(value: Any) -> str:
    if not isinstance(value, str):
        raise errors.QueryFilterParseError(f"Expected a field name, got {value!r}")
    return value


def requested_names(qfilter: Any, field: str) -> list[Any] | None:
    """The values a filter asks for by name alone (``gnt-job info 3 5``), else None.

    As Ganeti: a filter that is one equality on ``field`` or an ``|`` of them
    names the items wanted; such a query answers for each of them, found or not.
    """
    if not isinstance(qfilter, list) or not qfilter:
        return None
    terms = qfilter[1:] if qfilter[0] == "|" else [qfilter]
    names = []
    for term in terms:
        if not (
            isinstance(term, list)
            and len(term) == 3
            and term[0] in ("=", "==")
            and term[1] == field
        ):
            return None
        names.append(term[2])
    return names or None


def simple_filter(field: str, values: list[Any]) -> list[Any] | None:
    """Ganeti's MakeSimpleFilter: ``["|", ["=", field, v]...]`` (None for no values)."""
    if not values:
        return None
    return ["|", *(["==", field, value] for value in values)]
