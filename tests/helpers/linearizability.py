"""A linearizability checker for histories of calls on keys (tests/helpers/history.py).

The search is Wing & Gong's, with two improvements from Lowe ("Testing for
linearizability", 2017):

- *just-in-time linearisation*: the history's events are walked in time
  order and a call is linearized only when it must be, at the return of a
  call not yet linearized: then some of the calls pending at that moment
  are linearized (in some order), ending with that call;
- *memoisation*: a configuration (where the walk is, which calls are
  linearized, the model's state) is explored once; reaching it again by
  another order of the same calls is a dead end already known.

A history is linearizable if and only if each key's sub-history is (Herlihy
& Wing's locality, "P-compositionality" in Lowe's terms), so each key is
searched alone: this keeps the searches small.

Calls whose outcome is unknown (Status.INFO) may take effect at any point
after their invoke, or never; calls that failed did not take effect and
are left out, except a refusal a model can check (a compare-and-set refused
by Conflict says the key was not at the version expected).

Cost: 10,000 calls of 5 clients on 50 keys check in about 0.1 s; on one key
in 0.5-5 s.  What grows is the number of calls of unknown outcome, each of
which may or may not have taken effect: proving a history with hundreds of
them on one key wrong may explore millions of configurations, hence
``limit`` (Undecided past it).

Models (one per kind of key): :class:`Register` (read / write / cas),
:class:`Entry` (a key of the KeyValueStore port: get / put / delete, with
expected versions) and :class:`Serial` (the config store's serial: load /
commit).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tests.helpers.history import Operation, Status

# What a call does to a state: the state after, or None where it cannot
# have taken effect with the outcome it had.
Transition = Callable[[Any], Hashable | None]

# The refusal that is an answer about the state (ports.Conflict).
CONFLICT = "Conflict"

# The most states a violation names.
SHOWN_STATES = 4
# The calls before the one that cannot be linearized that a violation names.
SHOWN_BEFORE = 3


class Model(Protocol):
    """A sequential specification of one key."""

    def initial(self) -> Hashable:
        """The key's state before any call."""
        ...

    def transition(self, op: Operation) -> Transition | None:
        """What ``op`` (with its outcome) does to a state; None if it bears on
        nothing (a failed write, a read whose answer never came).
        ValueError for a call the model does not know."""
        ...

    def describe(self, state: Any) -> str:
        """The state in words."""
        ...


class Undecided(RuntimeError):
    """The search of one key went past the configurations it was allowed."""


@dataclass(frozen=True)
class Violation:
    """Why a key's history is not linearizable: no order of the calls before
    it lets ``operation`` take effect with the outcome it had."""

    key: str
    operation: Operation
    # What the key may hold when the operation takes effect, in every order
    # of the calls before it.
    states: list[str]
    # The calls that overlap the operation in time.
    concurrent: list[Operation]
    # The last calls that ended before the operation began.
    before: list[Operation]

    def __str__(self) -> str:
        lines = [
            f"key {self.key!r}: {self.operation} cannot be linearized;"
            f" the key could only hold: {'; '.join(self.states)}"
        ]
        lines += [f"  before it: {op}" for op in self.before]
        lines += [f"  concurrent: {op}" for op in self.concurrent]
        return "\n".join(lines)


@dataclass
class Verdict:
    """The outcome of a check: true if the history is linearizable."""

    violations: list[Violation] = field(default_factory=list)
    keys: int = 0
    operations: int = 0
    # Configurations explored, over every key (the search's cost).
    configurations: int = 0

    def __bool__(self) -> bool:
        return not self.violations

    def __str__(self) -> str:
        if not self.violations:
            return f"linearizable ({self.operations} calls on {self.keys} keys)"
        return "\n".join(str(violation) for violation in self.violations)


def check(operations: Iterable[Operation], model: Model, limit: int | None = None) -> Verdict:
    """Whether the history is linearizable, key by key under ``model``.
    Undecided if one key's search explores more than ``limit`` configurations."""
    by_key: dict[str, list[Operation]] = defaultdict(list)
    for op in operations:
        by_key[op.key].append(op)
    verdict = Verdict(keys=len(by_key))
    for key in sorted(by_key):
        search = _KeySearch(key, by_key[key], model, limit)
        verdict.operations += len(search.ops)
        violation = search.run()
        verdict.configurations += search.explored
        if violation is not None:
            verdict.violations.append(violation)
    return verdict


class _KeySearch:
    """The search of one key's history.

    Two reductions for the calls of unknown outcome (which stay pending for
    ever, so that every one of them is a choice at every later return):

    - of two such calls that do the same (same call, same arguments), the
      later is taken only once the earlier is: so the ones a configuration
      has taken are, for each kind, the first ones invoked;
    - a configuration that took more of them than another at the same point
      (with the same calls done otherwise and the same state) can do nothing
      the other cannot, since they may also never take effect: it is skipped.
    """

    def __init__(self, key: str, ops: Sequence[Operation], model: Model, limit: int | None):
        self.key, self.model, self.limit = key, model, limit
        self.ops: list[Operation] = []
        self.moves: list[Transition] = []
        for op in sorted(ops, key=lambda op: op.invoked):
            move = model.transition(op)
            if move is not None:
                self.ops.append(op)
                self.moves.append(move)
        self.unknown = 0  # the calls of unknown outcome, as bits
        # For each call of unknown outcome, the last one before it that does
        # the same (-1: none).
        self.twin_before = [-1] * len(self.ops)
        last_of: dict[tuple[str, str], int] = {}
        for index, op in enumerate(self.ops):
            if op.status is Status.INFO:
                self.unknown |= 1 << index
                kind = (op.f, canonical(op.args))
                self.twin_before[index] = last_of.get(kind, -1)
                last_of[kind] = index
        self.returns = self._returns()
        # Per configuration without its unknown calls: the sets of unknown
        # calls taken with which it was explored.
        self.seen: dict[tuple[int, int, Hashable], list[int]] = {}
        self.explored = 0

    def _returns(self) -> list[tuple[int, int]]:
        """The returns in time order: (the call's index, the set of calls
        invoked before it as bits).  At equal times an invoke comes first:
        the calls are taken as concurrent, which forbids nothing."""
        events: list[tuple[int, int, int]] = []
        for index, op in enumerate(self.ops):
            events.append((op.invoked, 0, index))
            if op.status is not Status.INFO:
                assert op.completed is not None
                events.append((op.completed, 1, index))
        events.sort()
        returns, invoked = [], 0
        for _, is_return, index in events:
            if is_return:
                returns.append((index, invoked))
            else:
                invoked |= 1 << index
        return returns

    def run(self) -> Violation | None:
        """None if the key's history is linearizable, else why not."""
        returns, moves, twin_before = self.returns, self.moves, self.twin_before
        stack: list[tuple[int, int, Hashable]] = [(0, 0, self.model.initial())]
        deepest, stuck_states = -1, list[Hashable]()
        while stack:
            at, done, state = stack.pop()
            # Returns of calls already linearized need nothing.
            while at < len(returns) and done >> returns[at][0] & 1:
                at += 1
            if at == len(returns):
                return None
            if not self._first_visit(at, done, state):
                continue
            if at > deepest:
                deepest, stuck_states = at, []
            if at == deepest:
                stuck_states.append(state)
            returning, invoked = returns[at]
            # Another pending call first (staying at this return)...
            pending = _indexes(invoked & ~done & ~(1 << returning))
            waiting = set(pending)
            for index in pending:
                if twin_before[index] in waiting:
                    continue
                after = moves[index](state)
                if after is not None:
                    stack.append((at, done | 1 << index, after))
            # ... or the returning call now (tried first: pushed last).
            after = moves[returning](state)
            if after is not None:
                stack.append((at + 1, done | 1 << returning, after))
        return self._violation(returns[deepest][0], stuck_states)

    def _first_visit(self, at: int, done: int, state: Hashable) -> bool:
        """Record the configuration; False if it, or one that took fewer
        unknown calls, was explored before."""
        taken = done & self.unknown
        known = self.seen.setdefault((at, done & ~self.unknown, state), [])
        if any(earlier & ~taken == 0 for earlier in known):
            return False
        known[:] = [earlier for earlier in known if taken & ~earlier]
        known.append(taken)
        self.explored += 1
        if self.limit is not None and self.explored > self.limit:
            raise Undecided(f"key {self.key!r}: more than {self.limit} configurations")
        return True

    def _violation(self, index: int, states: list[Hashable]) -> Violation:
        op = self.ops[index]
        assert op.completed is not None
        names = list(dict.fromkeys(self.model.describe(state) for state in states))
        if len(names) > SHOWN_STATES:
            names = [*names[:SHOWN_STATES], f"{len(names) - SHOWN_STATES} more"]
        concurrent = [
            other
            for other in self.ops
            if other is not op
            and other.invoked <= op.completed
            and (other.completed is None or other.completed >= op.invoked)
        ]
        ended = [o for o in self.ops if o.completed is not None and o.completed < op.invoked]
        ended.sort(key=lambda o: o.completed or 0)
        return Violation(self.key, op, names, concurrent, ended[-SHOWN_BEFORE:])


def _indexes(bits: int) -> list[int]:
    """The positions of the bits set (faster than bit by bit arithmetic on
    integers of thousands of bits)."""
    text = bin(bits)
    top = len(text) - 1
    found, at = [], text.find("1", 2)
    while at != -1:
        found.append(top - at)
        at = text.find("1", at + 1)
    return found


def canonical(value: Any) -> str:
    """A JSON value as one string (states must compare and hash)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _unknown_call(model: str, op: Operation) -> ValueError:
    return ValueError(f"{model} model: no call {op.f!r} (on key {op.key!r}, call {op.id})")


class Register:
    """A register: ``read`` (ok: the value), ``write(value)``, ``cas(old,
    new)`` (refused by Conflict when the value is not ``old``).  The state is
    the value as canonical JSON."""

    def __init__(self, initial: Any = None) -> None:
        self._initial = canonical(initial)

    def initial(self) -> str:
        return self._initial

    def describe(self, state: str) -> str:
        return state

    def transition(self, op: Operation) -> Transition | None:
        if op.f == "read":
            if op.status is not Status.OK:
                return None
            seen = canonical(op.result)
            return lambda state: state if state == seen else None
        if op.f == "write":
            if op.status is Status.FAIL:
                return None
            value = canonical(op.args["value"])
            return lambda state: value
        if op.f == "cas":
            old, new = canonical(op.args["old"]), canonical(op.args["new"])
            if op.status is Status.FAIL:
                if op.error != CONFLICT:
                    return None
                return lambda state: state if state != old else None
            return lambda state: new if state == old else None
        raise _unknown_call("register", op)


# A KeyValueStore key: (exists, value as canonical JSON, version, exact).
# Absent, ``version`` is the highest it had (versions only grow).  After a
# put whose outcome is unknown, the version is not known: ``exact`` is False
# and the version is above ``version``; the first answer that names it fixes it.
EntryState = tuple[bool, str, int, bool]


class Entry:
    """One key of the KeyValueStore port (corral.state.ports): ``get`` (ok:
    None or [value, version]); ``put(value, expected=None)`` (ok: the new
    version, which is above every one before); ``delete(expected=None)`` (ok:
    whether it existed).  ``expected`` 0 means "does not exist"; a put or a
    delete refused by Conflict says the key was not at ``expected``."""

    def initial(self) -> EntryState:
        return (False, "", 0, True)

    def describe(self, state: EntryState) -> str:
        exists, value, version, exact = state
        if not exists:
            return "nothing"
        return f"{value} at version {version}" if exact else f"{value} at a version > {version}"

    def transition(self, op: Operation) -> Transition | None:
        expected: int | None = op.args.get("expected")
        if op.f not in ("get", "put", "delete"):
            raise _unknown_call("key-value", op)
        if op.status is Status.FAIL:
            if op.error != CONFLICT or expected is None or op.f == "get":
                return None
            return lambda state: state if _differs(state, expected) else None
        if op.f == "get":
            return None if op.status is Status.INFO else _get(op.result)
        if op.f == "put":
            value = canonical(op.args["value"])
            new = op.result if op.status is Status.OK else None
            return lambda state: _put(state, value, expected, new)
        existed = op.result if op.status is Status.OK else None
        return lambda state: _delete(state, expected, existed)


def _matches(state: EntryState, expected: int | None) -> EntryState | None:
    """The state if a call that expects ``expected`` may find it (with an
    unknown version made exact), else None."""
    exists, value, version, exact = state
    if expected is None:
        return state
    if expected == 0 or not exists:
        return state if expected == 0 and not exists else None
    if exact:
        return state if version == expected else None
    return (exists, value, expected, True) if expected > version else None


def _differs(state: EntryState, expected: int) -> bool:
    exists, _, version, exact = state
    if expected == 0 or not exists:
        return exists or expected != 0
    # An unknown version may differ from any one (this forgets that it does).
    return not exact or version != expected


def _get(result: Any) -> Transition:
    if result is None:
        return lambda state: state if not state[0] else None
    value, version = canonical(result[0]), int(result[1])

    def read(state: EntryState) -> EntryState | None:
        exists, held, at, exact = state
        if not exists or held != value or (at != version if exact else at >= version):
            return None
        return (True, value, version, True)

    return read


def _put(state: EntryState, value: str, expected: int | None, new: int | None) -> EntryState | None:
    found = _matches(state, expected)
    if found is None:
        return None
    if new is None:  # unknown: some version above the one it replaced
        return (True, value, found[2], False)
    return (True, value, new, True) if new > found[2] else None


def _delete(state: EntryState, expected: int | None, existed: bool | None) -> EntryState | None:
    found = _matches(state, expected)
    if found is None or (existed is not None and existed != found[0]):
        return None
    return (False, "", found[2], True)


class Serial:
    """The config store's serial: ``load`` (ok: the serial) and
    ``commit(serial)``, which takes effect only on ``serial - 1`` (else
    Conflict).  The state is the serial."""

    def __init__(self, initial: int = 1) -> None:
        self._initial = initial

    def initial(self) -> int:
        return self._initial

    def describe(self, state: int) -> str:
        return f"serial {state}"

    def transition(self, op: Operation) -> Transition | None:
        if op.f == "load":
            if op.status is not Status.OK:
                return None
            seen = int(op.result)
            return lambda state: state if state == seen else None
        if op.f == "commit":
            serial = int(op.args["serial"])
            if op.status is Status.FAIL:
                if op.error != CONFLICT:
                    return None
                return lambda state: state if state != serial - 1 else None
            return lambda state: serial if state == serial - 1 else None
        raise _unknown_call("serial", op)
