"""Ganeti's query filter language: prefix lists such as ``["&", ["=", "name", "x"]]``.

Operators: ``|`` ``&`` ``!`` (logic), ``?`` (truth of a field), ``=`` ``==``
``!=`` ``<`` ``>`` ``<=`` ``>=`` (comparison), ``=~`` (regular expression) and
``=[]`` (list contains).
"""

from __future__ import annotations

import operator
import re
import time
from collections.abc import Callable

from corral import constants as C
from corral import errors

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

    import regex

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


# Seconds one query may spend evaluating its filter.  It runs on masterd's
# event loop, so this is also how long it can make other clients wait: well
# under the second the issue allows, far over what a sane filter needs (a
# simple regular expression over 100,000 names takes about 0.1 s).
FILTER_BUDGET = 0.5
# Limits of a regular expression, checked before it is compiled: the ``regex``
# engine expands counted repeats when compiling (``(a{1000}){1000}`` takes a
# gigabyte), and compiling a very long pattern takes seconds.
MAX_REGEX_LENGTH = 10_000
# Operators inside operators, at most (Ganeti's own filters are a few deep).
MAX_FILTER_DEPTH = 100
MAX_REGEX_REPEATS = 100_000
_ESCAPE = re.compile(r"\\.", re.DOTALL)
_COUNTED_REPEAT = re.compile(r"\{(\d*)(?:,(\d*))?\}")


def compile_regex(pattern: str) -> regex.Pattern[str]:
    """A pattern of the ``regex`` engine (re's syntax), within the limits above;
    QueryFilterParseError otherwise."""
    if len(pattern) > MAX_REGEX_LENGTH:
        raise errors.QueryFilterParseError(
            f"Regular expression of {len(pattern)} characters is too long"
            f" (at most {MAX_REGEX_LENGTH})"
        )
    # The product of every count bounds what nested repeats expand to.
    product = 1
    for low, high in _COUNTED_REPEAT.findall(_ESCAPE.sub("", pattern)):
        product *= max(int(low or 0), int(high or 0), 1)
        if product > MAX_REGEX_REPEATS:
            raise errors.QueryFilterParseError(
                f"Regular expression {_short(pattern)} repeats too much (counted repeats"
                f" multiply to more than {MAX_REGEX_REPEATS}); simplify it"
            )
    import regex  # here: ~3 MB that a masterd whose queries use no regex never needs

    try:
        return regex.compile(pattern)
    except (regex.error, OverflowError, RecursionError, MemoryError) as err:
        raise errors.QueryFilterParseError(
            f"Invalid regular expression {_short(pattern)}: {err}"
        ) from None


def _short(text: str, limit: int = 80) -> str:
    """``text`` quoted, cut to ``limit`` characters for an error message."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


class _Budget:
    """The time left to one evaluation of a filter, counted from its first item."""

    __slots__ = ("deadline", "qfilter")

    def __init__(self, qfilter: Any) -> None:
        self.qfilter = qfilter
        self.deadline: float | None = None

    def remaining(self, pattern: str | None = None) -> float:
        """Seconds left; the over-budget error once there are none."""
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + FILTER_BUDGET
        left = self.deadline - now
        if left <= 0:
            raise self.exceeded(pattern)
        return left

    def exceeded(self, pattern: str | None) -> errors.OpPrereqError:
        what = f"regular expression {_short(pattern)}" if pattern is not None else "filter"
        return errors.OpPrereqError(
            f"Query filter {_short(str(self.qfilter))} took more than {FILTER_BUDGET} s"
            f" to evaluate (its {what}); simplify the expression",
            C.ECODE_INVAL,
        )


def compile_filter(qfilter: Any, value_of: ValueOf) -> Predicate:
    """Turn a filter into a predicate; ``None`` or ``[]`` matches everything.

    One predicate evaluates within FILTER_BUDGET seconds in all, counted from
    its first call, or raises OpPrereqError: compile a new one per query.
    """
    if qfilter is None or qfilter == []:
        return lambda item: True
    _check_depth(qfilter)
    budget = _Budget(qfilter)
    predicate = _compile(qfilter, value_of, budget)

    def bounded(item: Any) -> bool:
        budget.remaining()
        return predicate(item)

    return bounded


def _check_depth(qfilter: Any) -> None:
    """Refuse a filter nested deeper than MAX_FILTER_DEPTH (compiling and
    evaluating it recurse once per level)."""
    level: list[Any] = [qfilter]
    for _depth in range(MAX_FILTER_DEPTH):
        level = [arg for node in level if isinstance(node, list) for arg in node[1:]]
        if not level:
            return
    raise errors.QueryFilterParseError(
        f"Query filter nested more than {MAX_FILTER_DEPTH} levels deep; simplify it"
    )


def _compile(node: Any, value_of: ValueOf, budget: _Budget) -> Predicate:
    if not isinstance(node, list) or not node or not isinstance(node[0], str):
        raise errors.QueryFilterParseError(f"Invalid filter expression {node!r}")
    op, args = node[0], node[1:]
    if op in ("|", "&"):
        parts = [_compile(arg, value_of, budget) for arg in args]
        combine = any if op == "|" else all
        return lambda item: combine(p(item) for p in parts)
    if op == "!":
        _arity(node, 1)
        inner = _compile(args[0], value_of, budget)
        return lambda item: not inner(item)
    if op == "?":
        _arity(node, 1)
        get = value_of(_field_name(args[0]))
        return lambda item: bool(get(item))
    if op in _COMPARE:
        return _comparison(node, value_of, _COMPARE[op])
    if op == "=~":
        _arity(node, 2)
        return _regex_predicate(value_of(_field_name(args[0])), str(args[1]), budget)
    if op == "=[]":
        _arity(node, 2)
        get = value_of(_field_name(args[0]))
        return _contains(get, args[1])
    raise errors.QueryFilterParseError(f"Unknown filter operator {op!r}")


def _regex_predicate(get: Callable[[Any], Any], pattern: str, budget: _Budget) -> Predicate:
    compiled = compile_regex(pattern)

    def predicate(item: Any) -> bool:
        value = get(item)
        try:
            found = compiled.search("" if value is None else str(value), timeout=budget.remaining())
        except TimeoutError:
            raise budget.exceeded(pattern) from None
        return found is not None

    return predicate


def _contains(get: Callable[[Any], Any], wanted: Any) -> Predicate:
    def predicate(item: Any) -> bool:
        try:
            return wanted in (get(item) or [])
        except TypeError:  # not a list field
            return False

    return predicate


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
    # Depth first, without recursion: the filter comes from a client.
    stack = [qfilter]
    while stack:
        node = stack.pop()
        if not (isinstance(node, list) and node and isinstance(node[0], str)):
            continue
        if node[0] in ("|", "&", "!"):
            stack.extend(reversed(node[1:]))
        elif len(node) > 1 and isinstance(node[1], str):
            out.append(node[1])
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

    As Ganeti (luxid's requestedNames): a filter made only of equalities on
    ``field`` joined by ``|``, nested or not, names the items wanted, in its
    order, repeats included; such a query answers for each of them.
    """
    return _names(qfilter, field) or None


def _names(qfilter: Any, field: str) -> list[Any] | None:
    if not isinstance(qfilter, list) or not qfilter:
        return None
    if qfilter[0] == "|":
        names: list[Any] = []
        for term in qfilter[1:]:
            found = _names(term, field)
            if found is None:
                return None
            names += found
        return names
    if len(qfilter) == 3 and qfilter[0] in ("=", "==") and qfilter[1] == field:
        return [qfilter[2]]
    return None


def simple_filter(field: str, values: list[Any]) -> list[Any] | None:
    """Ganeti's MakeSimpleFilter: ``["|", ["=", field, v]...]`` (None for no values)."""
    if not values:
        return None
    return ["|", *(["==", field, value] for value in values)]
