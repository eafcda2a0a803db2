"""Job filter rules as the scheduler applies them, the way luxid does.

Rules are taken in order of priority, then watermark, then uuid.  The rule
that *applies* to a job is the first one whose predicates all match it and
whose action is not CONTINUE.  Then:

- ACCEPT (or no rule): the job runs as usual;
- PAUSE: the job stays queued;
- REJECT: a job not started yet is cancelled (its opcodes end "canceled",
  with no result), when it enters the queue or when the rules change;
- ``["RATE_LIMIT", n]``: the job starts only while fewer than ``n`` running
  jobs have this rule applying to them.

Jobs already running are never touched.  A predicate is ``[name, filter]``
with a query-language filter evaluated as luxid evaluates it:

- ``jobid``: only comparisons on the field ``id``, against a number or the
  string ``"watermark"`` (the rule's watermark);
- ``opcode``: any operator; fields are dotted paths into an opcode's fields
  (``OP_ID``, ``duration``, ...); true if true for one opcode of the job;
- ``reason``: only comparisons, on ``source``, ``reason`` and ``timestamp``
  of a reason-trail entry; true if true for one entry of one opcode.

In ``jobid`` and ``reason``, an operator or field they do not offer makes the
whole predicate false (luxid evaluates them in the Maybe monad); so does, in
``opcode``, a path missing from the opcode or a value of the wrong type.
"""

from __future__ import annotations

import functools
import logging
import operator
import time
from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Any

from corral import constants as C
from corral.jobs.filter_decode import RATE_LIMIT
from corral.jobs.model import Job
from corral.jobs.states import advance
from corral.objects.filter_rule import FilterRule
from corral.opcodes.base import OpCode
from corral.query.filter import compile_regex

log = logging.getLogger(__name__)

ACCEPT = "ACCEPT"
CONTINUE = "CONTINUE"
REJECT = "REJECT"

# A leaf's verdict: True, False, or None when luxid's evaluation fails.
Verdict = bool | None
Leaf = Callable[[str, Any, Any], Verdict]

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "<": operator.lt,
    ">": operator.gt,
    "<=": operator.le,
    ">=": operator.ge,
}
# Seconds one regular expression of a rule may take on one value.  Rules are
# evaluated on masterd's event loop for every job queued: an expression that
# takes longer counts as failed (the predicate is false), now and from then on.
RULE_REGEX_TIMEOUT = 0.1
_slow_patterns: set[str] = set()
_compiled_regex = functools.lru_cache(maxsize=256)(compile_regex)

# The common opcode fields are luxid's "meta" parameters, not part of the
# opcode the ``opcode`` predicate looks at.
_META_FIELDS = frozenset(OpCode.model_fields)


def evaluate(node: Any, leaf: Leaf) -> Verdict:
    """A normalised filter's value, leaves given by ``leaf(op, field, value)``.

    ``&`` and ``|`` stop at the first false (true) operand; a failed leaf
    reached before that makes the whole filter fail (None).
    """
    if node is None:
        return True
    op = node[0]
    if op == "&":
        for sub in node[1:]:
            verdict = evaluate(sub, leaf)
            if verdict is not True:
                return verdict
        return True
    if op == "|":
        for sub in node[1:]:
            verdict = evaluate(sub, leaf)
            if verdict is not False:
                return verdict
        return False
    if op == "!":
        verdict = evaluate(node[1], leaf)
        return None if verdict is None else not verdict
    return leaf(op, node[1], node[2] if len(node) > 2 else None)


def filter_fields(node: Any) -> list[str]:
    """Every field a normalised filter names."""
    if node is None:
        return []
    if node[0] in ("&", "|", "!"):
        return [name for sub in node[1:] for name in filter_fields(sub)]
    return [node[1]]


class JobView:
    """What the predicates see of a job, built on first use."""

    def __init__(self, job: Job) -> None:
        self.id = job.id
        self._job = job
        self._opcodes: list[dict[str, Any]] | None = None

    @property
    def opcodes(self) -> list[dict[str, Any]]:
        """Each opcode's fields as stored, without the common (meta) ones."""
        if self._opcodes is None:
            self._opcodes = [
                {k: v for k, v in op.stored_input().items() if k not in _META_FIELDS}
                for op in self._job.ops
            ]
        return self._opcodes

    @property
    def reasons(self) -> Iterable[list[Any]]:
        """Every reason-trail entry of every opcode."""
        return (entry for op in self._job.ops for entry in op.input.reason)


# jobid
def _jobid_leaf(job_id: int, watermark: int) -> Leaf:
    def leaf(op: str, field: Any, value: Any) -> Verdict:
        if op not in _COMPARE or field != "id":
            return None
        if value == "watermark":
            return _COMPARE[op](job_id, watermark)
        if isinstance(value, int):
            return _COMPARE[op](job_id, value)
        return None

    return leaf


# opcode
def _json_key(value: Any) -> Any:
    """An ordering of JSON values like luxid's: null < booleans < numbers <
    strings < lists < objects, then by content."""
    if value is None:
        return (0,)
    if isinstance(value, bool):
        return (1, value)
    if isinstance(value, int | float):
        return (2, Fraction(value))
    if isinstance(value, str):
        return (3, value)
    if isinstance(value, list):
        return (4, [_json_key(item) for item in value])
    return (5, [(key, _json_key(item)) for key, item in value.items()])


def _access(opcode: dict[str, Any], path: str) -> tuple[bool, Any]:
    value: Any = opcode
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            return False, None
        value = value[key]
    return True, value


def _contains(items: Any, wanted: Any) -> Verdict:
    if not isinstance(items, list):
        return None
    if isinstance(wanted, str):
        if not all(isinstance(item, str) for item in items):
            return None
        return wanted in items
    if not all(isinstance(i, int | float) and not isinstance(i, bool) for i in items):
        return None
    return wanted in [round(Fraction(item)) for item in items]


def _search(pattern: str, value: str) -> Verdict:
    """Whether ``pattern`` matches ``value``; None if it takes too long (see
    RULE_REGEX_TIMEOUT), or took too long once before."""
    if pattern in _slow_patterns:
        return None
    try:
        return _compiled_regex(pattern).search(value, timeout=RULE_REGEX_TIMEOUT) is not None
    except TimeoutError:
        _slow_patterns.add(pattern)
        log.warning(
            "Job filter rule expression %r took more than %s s; it no longer matches any job",
            pattern,
            RULE_REGEX_TIMEOUT,
        )
        return None


def _opcode_leaf(values: dict[str, Any]) -> Leaf:
    def leaf(op: str, field: Any, wanted: Any) -> Verdict:
        value = values[field]
        if op in _COMPARE:
            return _COMPARE[op](_json_key(value), _json_key(wanted))
        if op == "?":
            return value if isinstance(value, bool) else None
        if op == "=~":
            return _search(wanted, value) if isinstance(value, str) else None
        return _contains(value, wanted)

    return leaf


def _opcode_matches(node: Any, opcode: dict[str, Any]) -> bool:
    values = {}
    for name in filter_fields(node):
        found, values[name] = _access(opcode, name)
        if not found:
            return False
    return evaluate(node, _opcode_leaf(values)) is True


# reason
def _filter_value_key(value: Any) -> tuple[int, Any]:
    """luxid's order of filter values: every string before every number."""
    return (0, value) if isinstance(value, str) else (1, value)


def _reason_leaf(entry: list[Any]) -> Leaf:
    source, text, timestamp = entry
    mine = {"source": (0, source), "reason": (0, text), "timestamp": (1, timestamp)}

    def leaf(op: str, field: Any, value: Any) -> Verdict:
        if op not in _COMPARE or field not in mine:
            return None
        return _COMPARE[op](mine[field], _filter_value_key(value))

    return leaf


class Rule:
    """A filter rule ready to be matched against jobs."""

    def __init__(self, rule: FilterRule) -> None:
        self.uuid = rule.uuid
        self.watermark = rule.watermark
        self.order = (rule.priority, rule.watermark, rule.uuid)
        self.predicates = [(name, node) for name, node in rule.predicates]
        self.action = rule.action if isinstance(rule.action, str) else RATE_LIMIT
        self.limit = rule.action[1] if isinstance(rule.action, list) else None

    def _predicate(self, name: str, node: Any, job: JobView) -> bool:
        if name == "jobid":
            return evaluate(node, _jobid_leaf(job.id, self.watermark)) is True
        if name == "opcode":
            return any(_opcode_matches(node, opcode) for opcode in job.opcodes)
        return any(evaluate(node, _reason_leaf(entry)) is True for entry in job.reasons)

    def matches(self, job: JobView) -> bool:
        """Whether all the rule's predicates hold for the job."""
        return all(self._predicate(name, node, job) for name, node in self.predicates)


class Gate:
    """One scheduling pass: which jobs may start, counting rate-limit slots."""

    def __init__(self, filters: JobFilters, running: Iterable[Job]) -> None:
        self._filters = filters
        # Slots of the RATE_LIMIT rules taken by the jobs running now.
        self._used: dict[str, int] = {}
        for job in running:
            rule = filters.applying(job)
            if rule is not None and rule.limit is not None:
                self._used[rule.uuid] = self._used.get(rule.uuid, 0) + 1

    def admit(self, job: Job) -> bool:
        """Whether the job may start now; if so it takes its rule's slot."""
        rule = self._filters.applying(job)
        if rule is None or rule.action == ACCEPT:
            return True
        if rule.limit is None:  # PAUSE (REJECT jobs are cancelled before)
            return False
        used = self._used.get(rule.uuid, 0)
        if used >= rule.limit:
            return False
        self._used[rule.uuid] = used + 1
        return True


class JobFilters:
    """The cluster's filter rules, in the order they are evaluated."""

    def __init__(self, rules: Iterable[FilterRule] = ()) -> None:
        self._rules = sorted((Rule(rule) for rule in rules), key=lambda r: r.order)

    def __bool__(self) -> bool:
        return bool(self._rules)

    def applying(self, job: Job) -> Rule | None:
        """The rule that applies to the job, if any."""
        view = JobView(job)
        return next((r for r in self._rules if r.action != CONTINUE and r.matches(view)), None)

    def rejecting(self, job: Job) -> Rule | None:
        """The REJECT rule applying to the job, if that is what applies."""
        rule = self.applying(job) if self._rules else None
        return rule if rule is not None and rule.action == REJECT else None

    def gate(self, running: Iterable[Job]) -> Gate | None:
        """The gate of one scheduling pass; None without rules (nothing to check)."""
        return Gate(self, running) if self._rules else None


def reject(job: Job, rule: Rule) -> None:
    """End a job not started yet as luxid ends a rejected one: every opcode
    canceled, with an end time and no result."""
    now = time.time()
    for op in job.ops:
        if not op.finished:
            advance(op, C.OP_STATUS_CANCELED)
            op.end_timestamp = now
    job.end_timestamp = now
    log.info("Job %s rejected by filter rule %s", job.id, rule.uuid)
