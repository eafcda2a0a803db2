"""The linearizability checker (tests/helpers/linearizability.py) and the
history recorder (tests/helpers/history.py) the fault tests use.

Known histories, linearizable or not; histories of a real sequential
execution (a store simulated here, apart from the checker's models) given
random overlapping intervals, which must pass, and the same with one answer
made impossible, which must not; the checker against a plain Wing & Gong
search without its improvements on small random histories; and a history
recorded from concurrent clients of the real etcd key-value store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.state.etcd.kv import EtcdKeyValueStore
from corral.state.ports import NO_FENCE, Conflict, FencedOut, Versioned
from tests.helpers.etcd import AnswerCutter, EtcdBed
from tests.helpers.history import History, Operation, Status, load
from tests.helpers.linearizability import (
    CONFLICT,
    Entry,
    Model,
    Register,
    Serial,
    Undecided,
    check,
)

# An answer none of the simulated stores ever gives.
NEVER = "never written"


def op(
    process: str,
    f: str,
    start: int,
    end: int | None,
    result: Any = None,
    *,
    key: str = "x",
    status: Status = Status.OK,
    error: str = "",
    **args: Any,
) -> Operation:
    """A call written by hand: ``end`` None is a call that never answered."""
    if end is None:
        status = Status.INFO
    number = next(_numbers)
    return Operation(f"t:{number}", process, key, f, args, start, status, result, error, end)


_numbers = iter(range(1, 1 << 62))


def conflict(process: str, f: str, start: int, end: int, **args: Any) -> Operation:
    return op(process, f, start, end, status=Status.FAIL, error=CONFLICT, **args)


# Registers: classic histories
def test_a_read_of_the_value_before_a_completed_write_is_stale() -> None:
    history = [
        op("a", "write", 0, 10, value=1),
        op("a", "write", 20, 30, value=2),
        op("b", "read", 40, 50, 1),
    ]
    verdict = check(history, Register())
    assert not verdict
    (violation,) = verdict.violations
    assert violation.operation is history[2] and violation.states == ["2"]
    assert "key 'x'" in str(verdict) and "read() -> ok 1" in str(verdict)


def test_a_read_overlapping_a_write_may_see_either_value() -> None:
    for seen in (1, 2):
        history = [
            op("a", "write", 0, 10, value=1),
            op("a", "write", 20, 30, value=2),
            op("b", "read", 25, 50, seen),
        ]
        assert check(history, Register())


def test_two_reads_cannot_see_a_write_undone() -> None:
    # b sees the new value, then c (after b) sees the old one: stale.
    history = [
        op("a", "write", 0, 100, value=1),
        op("b", "read", 10, 20, 1),
        op("c", "read", 30, 40, None),
    ]
    assert not check(history, Register())


def test_two_cas_from_the_same_value_cannot_both_succeed() -> None:
    history = [
        op("a", "cas", 0, 10, old=0, new=1),
        op("b", "cas", 5, 15, old=0, new=2),
    ]
    assert not check(history, Register(0))
    history[1] = conflict("b", "cas", 5, 15, old=0, new=2)
    assert check(history, Register(0))


def test_a_read_of_a_value_never_written_is_refused() -> None:
    history = [op("a", "write", 0, 10, value=1), op("b", "read", 5, 15, 3)]
    verdict = check(history, Register())
    assert not verdict and verdict.violations[0].operation is history[1]


def test_a_cas_refused_while_the_value_was_the_one_expected_is_refused() -> None:
    history = [op("a", "write", 0, 10, value=1), conflict("b", "cas", 20, 30, old=1, new=2)]
    assert not check(history, Register())
    # Concurrent with another write, the value may have changed first.
    history.append(op("c", "write", 15, 25, value=3))
    assert check(history, Register())


def test_a_failed_write_never_took_effect() -> None:
    failed = op("a", "write", 0, 10, status=Status.FAIL, error="FencedOut", value=1)
    assert not check([failed, op("b", "read", 20, 30, 1)], Register())
    assert check([failed, op("b", "read", 20, 30, None)], Register())


def test_an_unknown_write_may_take_effect_later_or_never() -> None:
    unknown = op("a", "write", 0, None, value=1)
    assert check([unknown, op("b", "read", 20, 30, None)], Register())
    assert check([unknown, op("b", "read", 20, 30, 1)], Register())
    # Long after it was sent, still possible (an info answer is no end).
    late = [
        op("a", "write", 0, 5, status=Status.INFO, error="TimeoutError", value=1),
        op("b", "read", 20, 30, None),
        op("b", "read", 1000, 1010, 1),
    ]
    assert check(late, Register())


def test_an_unknown_write_cannot_be_undone_or_act_before_it_was_sent() -> None:
    unknown = op("a", "write", 10, None, value=1)
    seen_then_not = [unknown, op("b", "read", 20, 30, 1), op("b", "read", 40, 50, None)]
    assert not check(seen_then_not, Register())
    assert not check([op("b", "read", 0, 5, 1), unknown], Register())


def test_an_unknown_read_bears_on_nothing() -> None:
    history = [op("a", "write", 0, 10, value=1), op("b", "read", 20, None)]
    verdict = check(history, Register())
    assert verdict and verdict.operations == 1


def test_each_key_is_checked_alone_and_the_failing_key_is_named() -> None:
    history = [
        op("a", "write", 0, 10, value=1, key="good"),
        op("a", "write", 0, 10, value=1, key="bad"),
        op("b", "read", 20, 30, 1, key="good"),
        op("b", "read", 20, 30, 2, key="bad"),
    ]
    verdict = check(history, Register())
    assert verdict.keys == 2
    assert [violation.key for violation in verdict.violations] == ["bad"]


def test_a_violation_names_the_calls_before_and_beside_it() -> None:
    history = [
        op("a", "write", 0, 10, value=1),
        op("a", "write", 20, 30, value=2),
        op("b", "read", 40, 60, 1),
        op("c", "write", 50, 70, value=3),
    ]
    (violation,) = check(history, Register()).violations
    assert violation.before == history[:2]
    assert violation.concurrent == [history[3]]


def test_a_search_past_its_limit_is_undecided() -> None:
    # Many unknown writes of different values: many orders to explore.
    history = [op(f"p{n}", "write", n, None, value=n) for n in range(12)]
    history.append(op("r", "read", 100, 110, NEVER))
    with pytest.raises(Undecided, match="key 'x'"):
        check(history, Register(), limit=500)


def test_unknown_calls_alike_or_left_out_are_not_explored_again() -> None:
    # 40 writes that never answered, of two values, and reads that alternate:
    # a plain memoised search tries every subset of the writes (more than
    # 200,000 configurations); taking writes alike in turn, and skipping a
    # configuration that took more of them than one seen, leaves about one
    # per read.
    history = [op(f"w{n}", "write", n, None, value=1 + n % 2) for n in range(40)]
    history += [op("r", "read", 100 + 10 * n, 105 + 10 * n, 1 + n % 2) for n in range(40)]
    assert check(history, Register(), limit=1_000)
    history.append(op("r", "read", 1000, 1005, 3))
    assert not check(history, Register(), limit=1_000)


def test_a_call_the_model_does_not_know_is_an_error() -> None:
    with pytest.raises(ValueError, match="no call 'append'"):
        check([op("a", "append", 0, 10, value=1)], Register())


# The key-value store's entries
def test_two_puts_expecting_the_same_version_cannot_both_succeed() -> None:
    # The lost update: both read version 5, both write on top of it.
    history = [
        op("a", "put", 0, 10, 5, value="v"),
        op("a", "get", 20, 30, ["v", 5]),
        op("b", "get", 20, 30, ["v", 5]),
        op("a", "put", 40, 50, 6, value="a", expected=5),
        op("b", "put", 40, 55, 7, value="b", expected=5),
    ]
    assert not check(history, Entry())
    history[4] = conflict("b", "put", 40, 55, value="b", expected=5)
    assert check(history, Entry())


def test_versions_only_grow_and_a_get_names_the_put_it_sees() -> None:
    first = op("a", "put", 0, 10, 5, value="v")
    assert not check([first, op("a", "put", 20, 30, 5, value="w")], Entry())
    assert not check([first, op("b", "get", 20, 30, ["v", 6])], Entry())
    assert not check([first, op("b", "get", 20, 30, ["w", 5])], Entry())
    assert check([first, op("b", "get", 20, 30, ["v", 5])], Entry())


def test_an_unknown_put_takes_the_version_a_later_call_finds() -> None:
    history = [
        op("a", "put", 0, 10, 5, value="v"),
        op("a", "put", 20, None, value="w", expected=5),
        op("b", "get", 40, 50, ["w", 9]),
        op("b", "put", 60, 70, 12, value="x", expected=9),
    ]
    assert check(history, Entry())
    # The version it took is above the one it replaced, and it is one only.
    assert not check([*history[:2], op("b", "get", 40, 50, ["w", 4])], Entry())
    stable = [*history[:3], op("b", "get", 60, 70, ["w", 10])]
    assert not check(stable, Entry())


def test_an_unknown_put_expecting_another_version_never_happened() -> None:
    history = [
        op("a", "put", 0, 10, 5, value="v"),
        op("a", "put", 20, None, value="w", expected=4),
        op("b", "get", 40, 50, ["w", 9]),
    ]
    assert not check(history, Entry())


def test_a_delete_says_whether_the_key_existed() -> None:
    put = op("a", "put", 0, 10, 5, value="v")
    assert check([put, op("a", "delete", 20, 30, True), op("a", "get", 40, 50, None)], Entry())
    assert not check([put, op("a", "delete", 20, 30, False)], Entry())
    assert not check([op("a", "delete", 0, 10, True)], Entry())
    # Expected 0: only a key that does not exist.
    assert check([op("a", "put", 0, 10, 3, value="v", expected=0)], Entry())
    assert not check([put, op("b", "put", 20, 30, 6, value="w", expected=0)], Entry())
    # A put after a delete still takes a newer version.
    gone = [put, op("a", "delete", 20, 30, True)]
    assert not check([*gone, op("a", "put", 40, 50, 4, value="w")], Entry())


def test_a_refused_put_says_the_version_was_another() -> None:
    put = op("a", "put", 0, 10, 5, value="v")
    assert not check([put, conflict("b", "put", 20, 30, value="w", expected=5)], Entry())
    assert check([put, conflict("b", "put", 20, 30, value="w", expected=4)], Entry())
    assert not check([conflict("b", "delete", 20, 30, expected=0)], Entry())


# The config store's serial
def test_commits_take_the_serials_in_turn() -> None:
    history = [
        op("a", "commit", 0, 10, serial=2),
        op("b", "load", 20, 30, 2),
        conflict("b", "commit", 40, 50, serial=2),
        op("a", "commit", 40, 50, serial=3),
    ]
    assert check(history, Serial(1))
    assert not check([*history, op("b", "commit", 60, 70, serial=3)], Serial(1))
    assert not check([conflict("a", "commit", 0, 10, serial=2)], Serial(1))
    assert not check([op("b", "load", 20, 30, 2)], Serial(1))


# Histories of a real sequential execution
@dataclasses.dataclass
class Store:
    """The real thing, one call at a time: a register, an entry of the
    key-value store and a serial per key (versions as etcd's revisions)."""

    rng: random.Random
    registers: dict[str, Any] = dataclasses.field(default_factory=dict)
    entries: dict[str, tuple[Any, int]] = dataclasses.field(default_factory=dict)
    serials: dict[str, int] = dataclasses.field(default_factory=dict)
    revision: int = 0

    def call(self, kind: str, key: str) -> tuple[str, dict[str, Any], Status, Any]:
        """A random call of ``kind`` made now: (name, arguments, status, answer)."""
        return CALLS[kind](self, key)

    def register(self, key: str) -> tuple[str, dict[str, Any], Status, Any]:
        value, rng = self.registers.get(key), self.rng
        choice = rng.randrange(3)
        if choice == 0:
            return "read", {}, Status.OK, value
        new = rng.randrange(5)
        if choice == 1:
            self.registers[key] = new
            return "write", {"value": new}, Status.OK, None
        old = rng.choice([value, rng.randrange(5)])
        if old != value:
            return "cas", {"old": old, "new": new}, Status.FAIL, CONFLICT
        self.registers[key] = new
        return "cas", {"old": old, "new": new}, Status.OK, None

    def entry(self, key: str) -> tuple[str, dict[str, Any], Status, Any]:
        found, rng = self.entries.get(key), self.rng
        version = found[1] if found else 0
        choice = rng.randrange(3)
        if choice == 0:
            return "get", {}, Status.OK, None if found is None else list(found)
        expected = rng.choice([None, version, version, 0, max(version - 1, 1)])
        args: dict[str, Any] = {} if expected is None else {"expected": expected}
        if expected is not None and expected != version:
            name = "put" if choice == 1 else "delete"
            return name, {**args, "value": 1} if choice == 1 else args, Status.FAIL, CONFLICT
        self.revision += rng.randint(1, 3)  # other keys' writes in between
        if choice == 1:
            value = rng.randrange(4)
            self.entries[key] = (value, self.revision)
            return "put", {**args, "value": value}, Status.OK, self.revision
        self.entries.pop(key, None)
        return "delete", args, Status.OK, found is not None

    def serial(self, key: str) -> tuple[str, dict[str, Any], Status, Any]:
        current = self.serials.setdefault(key, 1)
        if self.rng.randrange(2):
            return "load", {}, Status.OK, current
        serial = current + self.rng.choice([1, 1, 0, 2])
        if serial != current + 1:
            return "commit", {"serial": serial}, Status.FAIL, CONFLICT
        self.serials[key] = serial
        return "commit", {"serial": serial}, Status.OK, None


CALLS: dict[str, Callable[[Store, str], tuple[str, dict[str, Any], Status, Any]]] = {
    "register": Store.register,
    "entry": Store.entry,
    "serial": Store.serial,
}
MODELS: dict[str, Callable[[], Model]] = {"register": Register, "entry": Entry, "serial": Serial}
READS = {"read", "get", "load"}


def execution(
    rng: random.Random, kind: str, clients: int, calls: int, keys: int, unknown: float = 0.1
) -> list[Operation]:
    """``calls`` calls of ``clients`` clients, one after another each, on
    random keys: each takes effect at a random point within its interval,
    in the order of these points.  A call's answer is lost with probability
    ``unknown`` (and then it took effect, or did not, at random)."""
    store, ops = Store(rng), []
    for _, start, end, client in sorted(intervals(rng, clients, calls // clients)):
        key = f"k{rng.randrange(keys)}"
        lost = rng.random() < unknown
        if lost and rng.randrange(2):  # sent, never applied
            name, args, _, _ = Store(random.Random(rng.random())).call(kind, key)
            ops.append(op(client, name, start, None, key=key, **args))
            continue
        name, args, status, answer = store.call(kind, key)
        if lost:
            end_seen, info, why = rng.choice([None, end]), Status.INFO, "TimeoutError"
            ops.append(op(client, name, start, end_seen, key=key, status=info, error=why, **args))
        elif status is Status.FAIL:
            ops.append(op(client, name, start, end, key=key, status=status, error=answer, **args))
        else:
            ops.append(op(client, name, start, end, answer, key=key, **args))
    return ops


def intervals(rng: random.Random, clients: int, each: int) -> list[tuple[int, int, int, str]]:
    """``each`` calls of each client, one after another: (the point where
    it takes effect, its invoke, its return, the client)."""
    slots = []
    for client in range(clients):
        now = rng.randrange(20)
        for _ in range(each):
            point = now + rng.randint(1, 30)
            end = point + rng.randint(1, 30)
            slots.append((point, now, end, f"c{client}"))
            now = end + rng.randrange(10)
    return slots


def impossible(ops: list[Operation], rng: random.Random, kind: str) -> list[Operation] | None:
    """The history with one read's answer changed to one never given (None
    if it has no answered read)."""
    reads = [n for n, o in enumerate(ops) if o.f in READS and o.status is Status.OK]
    if not reads:
        return None
    index = rng.choice(reads)
    wrong = {"register": NEVER, "entry": [NEVER, 1], "serial": 10**9}[kind]
    changed = list(ops)
    changed[index] = dataclasses.replace(ops[index], result=wrong)
    return changed


KINDS = st.sampled_from(sorted(CALLS))
EXAMPLES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# What an execution is drawn from: its kind of calls, clients, calls and keys.
EXECUTIONS = {
    "kind": KINDS,
    "rng": st.randoms(use_true_random=False),
    "clients": st.integers(1, 6),
    "calls": st.integers(1, 80),
    "keys": st.integers(1, 3),
}


@EXAMPLES
@given(**EXECUTIONS)
def test_a_real_execution_is_linearizable(
    kind: str, rng: random.Random, clients: int, calls: int, keys: int
) -> None:
    ops = execution(rng, kind, clients, calls, keys)
    verdict = check(ops, MODELS[kind]())
    assert verdict, str(verdict)


@EXAMPLES
@given(**EXECUTIONS)
def test_an_answer_never_given_is_found(
    kind: str, rng: random.Random, clients: int, calls: int, keys: int
) -> None:
    ops = execution(rng, kind, clients, calls, keys)
    changed = impossible(ops, rng, kind)
    if changed is not None:
        verdict = check(changed, MODELS[kind]())
        assert not verdict
        (violation,) = verdict.violations
        assert violation.operation.result in ([NEVER, 1], NEVER, 10**9)


def plain_search(ops: Sequence[Operation], model: Model) -> bool:
    """Wing & Gong's search as published, without memoisation nor
    just-in-time linearisation: any minimal call next, every order tried
    (only for a few calls).  Calls of unknown outcome may never take effect."""
    moves = [(o, model.transition(o)) for o in ops]
    calls = [(o, move) for o, move in moves if move is not None]

    def search(left: list[tuple[Operation, Any]], state: Any) -> bool:
        if all(o.status is Status.INFO for o, _ in left):
            return True
        first_end = min(o.completed or 0 for o, _ in left if o.status is not Status.INFO)
        for index, (o, move) in enumerate(left):
            if o.invoked <= first_end:
                after = move(state)
                if after is not None and search(left[:index] + left[index + 1 :], after):
                    return True
        return False

    return search(calls, model.initial())


@settings(max_examples=400, deadline=None)
@given(
    kind=KINDS,
    rng=st.randoms(use_true_random=False),
    calls=st.integers(1, 7),
    corrupt=st.booleans(),
)
def test_the_search_agrees_with_a_plain_one(
    kind: str, rng: random.Random, calls: int, corrupt: bool
) -> None:
    ops = execution(rng, kind, 3, calls, 1, unknown=0.3)
    if corrupt and ops:  # any answer: the change may or may not be visible
        index = rng.randrange(len(ops))
        ops[index] = changed(ops[index], rng)
    model = MODELS[kind]()
    assert bool(check(ops, model)) == plain_search(ops, model)


def changed(call: Operation, rng: random.Random) -> Operation:
    """``call`` with another answer of the right shape, or the opposite
    outcome (ok or refused) for a call that answers nothing."""
    answers: dict[str, Callable[[], Any]] = {
        "read": lambda: rng.randrange(5),
        "get": lambda: rng.choice([None, [rng.randrange(4), rng.randint(1, 12)]]),
        "put": lambda: rng.randint(1, 12),
        "delete": lambda: rng.choice([True, False]),
        "load": lambda: rng.randint(1, 4),
    }
    if call.status is Status.INFO:
        return call
    if call.f in answers and call.status is Status.OK:
        return dataclasses.replace(call, result=answers[call.f]())
    if call.status is Status.OK:
        return dataclasses.replace(call, status=Status.FAIL, error=CONFLICT)
    return dataclasses.replace(call, status=Status.OK, error="", result=rng.randint(1, 12))


def test_ten_thousand_calls_on_fifty_keys(capsys: pytest.CaptureFixture[str]) -> None:
    ops = execution(random.Random(25), "entry", clients=5, calls=10_000, keys=50)
    started = time.perf_counter()
    verdict = check(ops, Entry())
    took = time.perf_counter() - started
    assert verdict, str(verdict)
    with capsys.disabled():
        print(
            f"\n  linearizability: {len(ops)} calls, {verdict.keys} keys, 5 clients,"
            f" {verdict.configurations} configurations checked in {took:.2f} s"
        )


# The recorder
def test_calls_from_several_threads_are_all_recorded() -> None:
    history = History()

    def client(name: str) -> None:
        for n in range(200):
            with history.call(name, "x", "write", value=n) as call:
                call.ok()

    threads = [threading.Thread(target=client, args=(f"t{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ops = history.operations()
    assert len(ops) == 800 and len({o.id for o in ops}) == 800
    assert all(o.status is Status.OK and o.completed and o.completed >= o.invoked for o in ops)


def test_a_refusal_fails_a_call_and_anything_else_leaves_it_unknown() -> None:
    history = History()
    with history.call("a", "x", "put", refusals=(Conflict, FencedOut), value=1) as call:
        raise Conflict("at version 3")
    assert call.status is Status.FAIL
    with pytest.raises(TimeoutError), history.call("a", "x", "put", refusals=(Conflict,)):
        raise TimeoutError("no answer")
    pending = history.invoke("b", "x", "get")
    refused, lost, never = history.operations()
    assert (refused.status, refused.error) == (Status.FAIL, "Conflict")
    assert lost.status is Status.INFO and "no answer" in lost.error and lost.completed
    assert never.id == pending.id and never.status is Status.INFO and never.completed is None
    with pytest.raises(RuntimeError, match="without an outcome"), history.call("a", "x", "get"):
        pass
    with pytest.raises(RuntimeError, match="already ended"):
        call.ok(1)


def test_histories_of_several_processes_merge(tmp_path: Path) -> None:
    first, second = History(), History()
    first.invoke("a", "x", "write", value=1).ok()
    second.invoke("b", "x", "read").ok(1)
    first.invoke("a", "x", "write", value=2)  # its process died: no answer
    first.save(tmp_path / "first.jsonl")
    second.save(tmp_path / "second.jsonl")
    ops = load([tmp_path / "first.jsonl", tmp_path / "second.jsonl"])
    assert [(o.process, o.f, o.status) for o in ops] == [
        ("a", "write", Status.OK),
        ("b", "read", Status.OK),
        ("a", "write", Status.INFO),
    ]
    assert check(ops, Register())
    with pytest.raises(ValueError, match="two invoke events"):
        load([tmp_path / "first.jsonl", tmp_path / "first.jsonl"])


# The real etcd key-value store
def _answer(found: Versioned | None) -> list[Any] | None:
    """A get's answer as the Entry model reads it."""
    return None if found is None else [found.value, found.version]


async def _client_loop(
    store: EtcdKeyValueStore, history: History, name: str, keys: list[str], rng: random.Random
) -> None:
    """Random gets and puts (blind, or expecting the version last seen)."""
    seen: dict[str, int] = {}
    for _ in range(40):
        key = rng.choice(keys)
        if rng.randrange(3) == 0:
            with history.call(name, key, "get") as call:
                found = await store.get(key)
                call.ok(_answer(found))
            if found is not None:
                seen[key] = found.version
            continue
        value, expected = rng.randrange(100), seen.get(key) if rng.randrange(4) else None
        args: dict[str, Any] = {"value": value, "expected": expected}
        with history.call(name, key, "put", refusals=(Conflict,), **args) as call:
            seen[key] = await store.put(key, value, NO_FENCE, expected)
            call.ok(seen[key])


async def test_concurrent_clients_of_etcd_see_a_linearizable_store(etcd_three: EtcdBed) -> None:
    history, prefix, rng = History(), etcd_three.prefix(), random.Random(7)
    endpoints = etcd_three.cluster.endpoints
    clients = [etcd_three.client(endpoints[n:] + endpoints[:n]) for n in range(len(endpoints))]
    try:
        stores = [EtcdKeyValueStore(clients[n % len(clients)], prefix) for n in range(5)]
        keys = ["a", "b", "c"]
        await asyncio.gather(
            *(
                _client_loop(store, history, f"c{n}", keys, random.Random(rng.random()))
                for n, store in enumerate(stores)
            )
        )
    finally:
        for client in clients:
            await client.close()
    ops = history.operations()
    outcomes = {(o.f, o.status) for o in ops}
    assert {("get", Status.OK), ("put", Status.OK), ("put", Status.FAIL)} <= outcomes
    verdict = check(ops, Entry())
    assert verdict, str(verdict)
    # The same history with one answer changed is caught.
    got = next(n for n, o in enumerate(ops) if o.f == "get" and o.result is not None)
    ops[got] = dataclasses.replace(ops[got], result=[ops[got].result[0], 1])
    assert not check(ops, Entry())


async def test_a_delete_whose_answer_was_lost_stays_linearizable(etcd_three: EtcdBed) -> None:
    """etcd applies a delete but its answer is cut: the client sends it again
    and must not report it refused (the history says it was not done)."""
    cutter = AnswerCutter(etcd_three.cluster.endpoints[0])
    client = etcd_three.client([await cutter.start()])
    history, key = History(), "k"
    try:
        kv = EtcdKeyValueStore(client, etcd_three.prefix())
        with history.call("a", key, "put", value="v") as call:
            version = await kv.put(key, "v", NO_FENCE)
            call.ok(version)
        await kv.delete("warm", NO_FENCE)  # the delete markers' lease exists
        cutter.arm()
        with history.call("a", key, "delete", refusals=(Conflict,), expected=version) as call:
            call.ok(await kv.delete(key, NO_FENCE, expected=version))
        with history.call("a", key, "get") as call:
            call.ok(_answer(await kv.get(key)))
        assert cutter.cut == 1
    finally:
        await client.close()
        await cutter.stop()
    verdict = check(history.operations(), Entry())
    assert verdict, str(verdict)
