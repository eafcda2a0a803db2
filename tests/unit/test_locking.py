"""Tests of corral.locking.LockManager: modes, order, priorities, cancellation, info()."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral import constants as C
from corral import errors
from corral.locking import LOCKSET, LockManager

CLUSTER = C.LEVEL_CLUSTER
INSTANCE = C.LEVEL_INSTANCE
NODE = C.LEVEL_NODE


async def settle(rounds: int = 5) -> None:
    """Let every ready task run a few steps."""
    for _ in range(rounds):
        await asyncio.sleep(0)


def start(
    lm: LockManager,
    owner: str,
    level: str,
    names: list[str],
    *,
    shared: bool = False,
    priority: int = C.OP_PRIO_NORMAL,
    granted: list[str] | None = None,
) -> asyncio.Task[None]:
    """Start an acquire in its own task; append ``owner`` to ``granted`` when it returns."""

    async def run() -> None:
        await lm.acquire(owner, level, names, shared=shared, priority=priority)
        if granted is not None:
            granted.append(owner)

    return asyncio.get_running_loop().create_task(run())


def lock_info(lm: LockManager, name: str) -> dict[str, Any] | None:
    return next((row for row in lm.info() if row["name"] == name), None)


# Shared and exclusive modes


async def test_shared_holders_coexist() -> None:
    lm = LockManager()
    await lm.acquire("1", CLUSTER, [C.BGL], shared=True)
    await lm.acquire("2", CLUSTER, [C.BGL], shared=True)
    assert lm.info() == [
        {"name": "cluster/BGL", "mode": "shared", "owner": ["1", "2"], "pending": []}
    ]
    assert lm.owned("1", CLUSTER) == {C.BGL}
    assert lm.owned("2", CLUSTER) == {C.BGL}


async def test_exclusive_blocks_exclusive_and_shared_until_release() -> None:
    lm = LockManager()
    await lm.acquire("1", CLUSTER, [C.BGL], shared=False)
    granted: list[str] = []
    t_excl = start(lm, "2", CLUSTER, [C.BGL], shared=False, granted=granted)
    t_shared = start(lm, "3", CLUSTER, [C.BGL], shared=True, granted=granted)
    await settle()
    assert granted == []
    assert lm.info() == [
        {
            "name": "cluster/BGL",
            "mode": "exclusive",
            "owner": ["1"],
            "pending": [["exclusive", ["2"]], ["shared", ["3"]]],
        }
    ]
    lm.release("1")
    await settle()
    # The exclusive waiter came first, so only it gets the lock.
    assert granted == ["2"]
    assert not t_shared.done()
    lm.release("2")
    await settle()
    assert granted == ["2", "3"]
    await asyncio.gather(t_excl, t_shared)
    lm.release("3")
    assert lm.info() == []


async def test_shared_request_waits_for_exclusive_holder() -> None:
    lm = LockManager()
    await lm.acquire("1", NODE, ["n1"], shared=False)
    task = start(lm, "2", NODE, ["n1"], shared=True)
    await settle()
    assert not task.done()
    lm.release("1", NODE, ["n1"])
    await asyncio.wait_for(task, 1)
    assert lock_info(lm, "node/n1") == {
        "name": "node/n1",
        "mode": "shared",
        "owner": ["2"],
        "pending": [],
    }


async def test_exclusive_request_waits_for_all_shared_holders() -> None:
    lm = LockManager()
    await lm.acquire("1", NODE, ["n1"], shared=True)
    await lm.acquire("2", NODE, ["n1"], shared=True)
    task = start(lm, "3", NODE, ["n1"], shared=False)
    await settle()
    lm.release("1")
    await settle()
    assert not task.done(), "one shared holder is left"
    lm.release("2")
    await asyncio.wait_for(task, 1)
    assert lm.owned("3", NODE) == {"n1"}


async def test_no_writer_starvation_shared_request_queues_behind_exclusive_waiter() -> None:
    lm = LockManager()
    await lm.acquire("1", CLUSTER, [C.BGL], shared=True)
    granted: list[str] = []
    start(lm, "2", CLUSTER, [C.BGL], shared=False, granted=granted)
    await settle()
    # Compatible with the current shared holder, but an exclusive waiter came first.
    t3 = start(lm, "3", CLUSTER, [C.BGL], shared=True, granted=granted)
    await settle()
    assert granted == []
    assert lock_info(lm, "cluster/BGL")["pending"] == [  # type: ignore[index]
        ["exclusive", ["2"]],
        ["shared", ["3"]],
    ]
    lm.release("1")
    await settle()
    assert granted == ["2"]
    lm.release("2")
    await asyncio.wait_for(t3, 1)
    assert granted == ["2", "3"]


async def test_release_wakes_consecutive_shared_waiters_but_stops_at_exclusive() -> None:
    lm = LockManager()
    await lm.acquire("x", NODE, ["n"], shared=False)
    granted: list[str] = []
    start(lm, "s1", NODE, ["n"], shared=True, granted=granted)
    start(lm, "s2", NODE, ["n"], shared=True, granted=granted)
    start(lm, "e", NODE, ["n"], shared=False, granted=granted)
    start(lm, "s3", NODE, ["n"], shared=True, granted=granted)
    await settle()
    lm.release("x")
    await settle()
    assert sorted(granted) == ["s1", "s2"]
    info = lock_info(lm, "node/n")
    assert info is not None
    assert info["mode"] == "shared"
    assert info["owner"] == ["s1", "s2"]
    assert info["pending"] == [["exclusive", ["e"]], ["shared", ["s3"]]]


# Names and levels


async def test_names_are_taken_in_sorted_order() -> None:
    lm = LockManager()
    await lm.acquire("other", NODE, ["b"], shared=False)
    task = start(lm, "1", NODE, ["c", "a", "b", "a"])
    await settle()
    # "a" sorts before the blocked "b", "c" after it: only "a" is held.
    assert lm.owned("1", NODE) == {"a"}
    assert lock_info(lm, "node/c") is None
    assert lock_info(lm, "node/b")["pending"] == [["exclusive", ["1"]]]  # type: ignore[index]
    lm.release("other")
    await asyncio.wait_for(task, 1)
    assert lm.owned("1", NODE) == {"a", "b", "c"}


async def test_lock_names_are_level_qualified() -> None:
    lm = LockManager()
    await lm.acquire("1", NODE, ["x"], shared=False)
    await lm.acquire("2", C.LEVEL_NODE_RES, ["x"], shared=False)
    await lm.acquire("2", C.LEVEL_NETWORK, [LOCKSET], shared=True)
    assert [row["name"] for row in lm.info()] == ["network/[lockset]", "node-res/x", "node/x"]


async def test_lower_level_after_higher_level_is_a_programmer_error() -> None:
    lm = LockManager()
    await lm.acquire("1", NODE, ["n1"], shared=False)
    with pytest.raises(errors.ProgrammerError, match="wrong lock order"):
        await lm.acquire("1", CLUSTER, [C.BGL], shared=True)
    with pytest.raises(errors.ProgrammerError, match="wrong lock order"):
        await lm.acquire("1", INSTANCE, ["i1"], shared=True)
    # Nothing was taken by the refused calls, and the held lock is intact.
    assert lm.owned("1", CLUSTER) == set()
    assert lm.owned("1", INSTANCE) == set()
    assert lm.owned("1", NODE) == {"n1"}
    # A higher level is fine.
    await lm.acquire("1", C.LEVEL_NODE_RES, ["n1"], shared=False)
    # After releasing the higher levels, lower ones may be taken again.
    lm.release("1", NODE)
    lm.release("1", C.LEVEL_NODE_RES)
    await lm.acquire("1", CLUSTER, [C.BGL], shared=True)


async def test_unknown_level_is_a_programmer_error() -> None:
    lm = LockManager()
    with pytest.raises(errors.ProgrammerError, match="Unknown lock level"):
        await lm.acquire("1", "config", ["x"], shared=False)
    assert lm.info() == []


async def test_a_second_request_at_a_held_level_is_refused() -> None:
    # It could take names out of order (a deadlock risk), so it is a programming error.
    lm = LockManager()
    await lm.acquire("1", NODE, ["b"], shared=False)
    with pytest.raises(errors.ProgrammerError, match="already holds locks at level node"):
        await lm.acquire("1", NODE, ["a"], shared=False)
    assert lm.owned("1", NODE) == {"b"}
    lm.release("1", NODE)
    await asyncio.wait_for(lm.acquire("1", NODE, ["a"], shared=False), 1)


async def test_release_of_some_names_keeps_the_others() -> None:
    lm = LockManager()
    await lm.acquire("1", CLUSTER, [C.BGL], shared=True)
    await lm.acquire("1", NODE, ["a", "b", "c"], shared=False)
    lm.release("1", NODE, ["b", "not-held"])
    assert lm.owned("1", NODE) == {"a", "c"}
    assert [row["name"] for row in lm.info()] == ["cluster/BGL", "node/a", "node/c"]
    lm.release("1", NODE)
    assert lm.owned("1", NODE) == set()
    assert lm.owned("1", CLUSTER) == {C.BGL}
    lm.release("1")
    assert lm.info() == []


async def test_release_of_an_unknown_owner_is_harmless() -> None:
    lm = LockManager()
    lm.release("nobody")
    lm.release("nobody", NODE, ["x"])
    assert lm.info() == []


# Priorities


async def test_waiters_are_served_by_priority_then_arrival() -> None:
    lm = LockManager()
    await lm.acquire("holder", NODE, ["n"], shared=False)
    granted: list[str] = []
    for owner, prio in [("a", 0), ("b", -10), ("c", 10), ("d", 0), ("e", -20)]:
        start(lm, owner, NODE, ["n"], priority=prio, granted=granted)
        await settle(1)
    await settle()
    assert [p[1][0] for p in lock_info(lm, "node/n")["pending"]] == [  # type: ignore[index]
        "e",
        "b",
        "a",
        "d",
        "c",
    ]
    lm.release("holder")
    for _ in range(5):
        await settle()
        assert len(granted) >= 1
        lm.release(granted[-1])
    await settle()
    assert granted == ["e", "b", "a", "d", "c"]


async def test_set_priority_reorders_pending_requests() -> None:
    lm = LockManager()
    await lm.acquire("holder", NODE, ["n"], shared=False)
    granted: list[str] = []
    start(lm, "a", NODE, ["n"], granted=granted)
    await settle(1)
    start(lm, "b", NODE, ["n"], granted=granted)
    await settle()
    lm.set_priority("b", C.OP_PRIO_HIGH)
    assert lock_info(lm, "node/n")["pending"] == [  # type: ignore[index]
        ["exclusive", ["b"]],
        ["exclusive", ["a"]],
    ]
    lm.release("holder")
    await settle()
    assert granted == ["b"]
    lm.release("b")
    await settle()
    assert granted == ["b", "a"]


async def test_set_priority_can_grant_a_compatible_request_moved_to_the_front() -> None:
    lm = LockManager()
    await lm.acquire("reader", NODE, ["n"], shared=True)
    granted: list[str] = []
    start(lm, "writer", NODE, ["n"], shared=False, granted=granted)
    await settle(1)
    start(lm, "reader2", NODE, ["n"], shared=True, granted=granted)
    await settle()
    assert granted == []
    lm.set_priority("reader2", C.OP_PRIO_HIGH)
    await settle()
    assert granted == ["reader2"]
    assert lock_info(lm, "node/n") == {
        "name": "node/n",
        "mode": "shared",
        "owner": ["reader", "reader2"],
        "pending": [["exclusive", ["writer"]]],
    }


async def test_set_priority_for_an_owner_without_requests_changes_nothing() -> None:
    lm = LockManager()
    await lm.acquire("1", NODE, ["n"], shared=False)
    before = lm.info()
    lm.set_priority("2", C.OP_PRIO_HIGH)
    assert lm.info() == before


# Cancellation


async def test_cancelled_acquire_releases_what_that_call_took() -> None:
    lm = LockManager()
    await lm.acquire("blocker", NODE, ["b"], shared=False)
    await lm.acquire("1", CLUSTER, [C.BGL], shared=True)
    granted: list[str] = []
    task = start(lm, "1", NODE, ["a", "b"], granted=granted)
    await settle()
    assert lm.owned("1", NODE) == {"a"}
    # Someone else queues for "a", which the waiting call holds.
    t2 = start(lm, "2", NODE, ["a"], granted=granted)
    await settle()
    assert granted == []

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await settle()
    # "a" was given up (so owner 2 got it), the request for "b" is gone,
    # and the BGL taken by an earlier call is still held.
    assert granted == ["2"]
    await t2
    assert lm.owned("1", NODE) == set()
    assert lm.owned("1", CLUSTER) == {C.BGL}
    assert lock_info(lm, "node/b") == {
        "name": "node/b",
        "mode": "exclusive",
        "owner": ["blocker"],
        "pending": [],
    }


async def test_cancelling_a_queued_exclusive_request_lets_shared_requests_behind_it_proceed() -> (
    None
):
    lm = LockManager()
    await lm.acquire("reader", CLUSTER, [C.BGL], shared=True)
    granted: list[str] = []
    writer = start(lm, "writer", CLUSTER, [C.BGL], shared=False, granted=granted)
    await settle(1)
    start(lm, "reader2", CLUSTER, [C.BGL], shared=True, granted=granted)
    await settle()
    assert granted == []
    writer.cancel()
    await settle()
    assert granted == ["reader2"]
    assert writer.cancelled()
    assert lock_info(lm, "cluster/BGL")["pending"] == []  # type: ignore[index]


async def test_cancel_right_after_the_grant_gives_the_lock_back() -> None:
    lm = LockManager()
    await lm.acquire("1", NODE, ["n"], shared=False)
    task = start(lm, "2", NODE, ["n"])
    await settle()
    lm.release("1")  # grants the lock to 2, whose task has not resumed yet
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert lm.owned("2", NODE) == set()
    # The lock is free again: nobody holds it and it is not listed.
    assert lm.info() == []
    await asyncio.wait_for(lm.acquire("3", NODE, ["n"], shared=False), 1)


async def test_cancel_after_grant_hands_the_lock_to_the_next_waiter() -> None:
    lm = LockManager()
    await lm.acquire("1", NODE, ["n"], shared=False)
    task2 = start(lm, "2", NODE, ["n"])
    await settle(1)
    granted: list[str] = []
    task3 = start(lm, "3", NODE, ["n"], granted=granted)
    await settle()
    lm.release("1")
    task2.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task2
    await asyncio.wait_for(task3, 1)
    assert granted == ["3"]
    assert lm.info() == [{"name": "node/n", "mode": "exclusive", "owner": ["3"], "pending": []}]


# info()


# Opportunistic acquisition (Ganeti's, for instance creation with an allocator)


async def test_acquire_available_takes_the_free_locks_only() -> None:
    lm = LockManager()
    await lm.acquire("1", NODE, ["b"], shared=False)
    blocked = start(lm, "2", NODE, ["c"])  # c is held by 3, 2 queues for it
    await lm.acquire("3", NODE, ["c"], shared=True)
    await settle()
    # Not b (held), nor c (shared, but 2 queues for it: no overtaking).
    got = await lm.acquire_available("4", NODE, ["a", "b", "c", "d"], shared=True)
    assert got == ["a", "d"] and lm.owned("4", NODE) == {"a", "d"}
    lm.release("3")
    await settle()
    assert blocked.done() and lm.owned("2", NODE) == {"c"}


async def test_acquire_available_waits_for_a_release_when_none_is_free() -> None:
    lm = LockManager()
    await lm.acquire("1", NODE, ["a", "b"], shared=False)
    task = asyncio.get_running_loop().create_task(
        lm.acquire_available("2", NODE, ["a", "b"], shared=False)
    )
    await settle()
    assert not task.done()
    lm.release("1", NODE, ["b"])
    assert await task == ["b"]
    assert lm.owned("2", NODE) == {"b"} and lm.owned("1", NODE) == {"a"}


async def test_acquire_available_of_nothing_takes_nothing() -> None:
    lm = LockManager()
    assert await lm.acquire_available("1", NODE, [], shared=False) == []


async def test_info_is_sorted_and_locks_disappear_when_idle() -> None:
    lm = LockManager()
    assert lm.info() == []
    await lm.acquire("7", CLUSTER, [C.BGL], shared=True)
    await lm.acquire("7", NODE, ["node-b", "node-a"], shared=False)
    await lm.acquire("8", CLUSTER, [C.BGL], shared=True)
    waiter = start(lm, "8", NODE, ["node-a"], shared=True)
    await settle()
    assert lm.info() == [
        {"name": "cluster/BGL", "mode": "shared", "owner": ["7", "8"], "pending": []},
        {
            "name": "node/node-a",
            "mode": "exclusive",
            "owner": ["7"],
            "pending": [["shared", ["8"]]],
        },
        {"name": "node/node-b", "mode": "exclusive", "owner": ["7"], "pending": []},
    ]
    lm.release("7")
    await waiter
    assert lm.info() == [
        {"name": "cluster/BGL", "mode": "shared", "owner": ["8"], "pending": []},
        {"name": "node/node-a", "mode": "shared", "owner": ["8"], "pending": []},
    ]
    lm.release("8")
    assert lm.info() == []


# Property: random concurrent use never deadlocks and never breaks exclusivity.

_NAMES = ["a", "b", "c"]
_request = st.tuples(
    st.integers(0, len(C.LOCK_LEVELS) - 1),
    st.sets(st.sampled_from(_NAMES), min_size=1),
    st.booleans(),
)
_job = st.fixed_dictionaries(
    {
        "requests": st.lists(_request, min_size=1, max_size=3),
        "priority": st.sampled_from([C.OP_PRIO_HIGH, C.OP_PRIO_NORMAL, C.OP_PRIO_LOW]),
        "hold": st.integers(0, 3),
        "cancel_after": st.none() | st.integers(0, 8),
        "reprioritize_after": st.none() | st.integers(0, 8),
    }
)


async def _simulate(jobs: list[dict[str, Any]]) -> None:
    lm = LockManager()
    # Our own view of who holds what: lock name -> owner -> shared?
    holders: dict[str, dict[str, bool]] = {}

    def check_invariants() -> None:
        for name, owners in holders.items():
            if any(not shared for shared in owners.values()):
                assert len(owners) == 1, f"exclusive lock {name} has owners {owners}"
        for row in lm.info():
            assert row["mode"] in ("shared", "exclusive")
            if row["mode"] == "exclusive":
                assert len(row["owner"]) == 1
            for owner in holders.get(row["name"], {}):
                assert owner in row["owner"]

    async def run(owner: str, spec: dict[str, Any]) -> None:
        wanted: dict[int, tuple[set[str], bool]] = {}
        for level_idx, names, shared in spec["requests"]:
            wanted.setdefault(level_idx, (names, shared))
        try:
            for level_idx in sorted(wanted):
                level = C.LOCK_LEVELS[level_idx]
                names, shared = wanted[level_idx]
                await lm.acquire(owner, level, names, shared=shared, priority=spec["priority"])
                assert lm.owned(owner, level) == names
                for name in names:
                    holders.setdefault(f"{level}/{name}", {})[owner] = shared
                check_invariants()
            for _ in range(spec["hold"]):
                await asyncio.sleep(0)
                check_invariants()
        finally:
            for owners in holders.values():
                owners.pop(owner, None)
            lm.release(owner)

    async def later(rounds: int, action: Any) -> None:
        for _ in range(rounds):
            await asyncio.sleep(0)
        action()

    tasks = [asyncio.create_task(run(str(i), spec)) for i, spec in enumerate(jobs)]
    helpers = []
    for i, spec in enumerate(jobs):
        if spec["cancel_after"] is not None:
            helpers.append(asyncio.create_task(later(spec["cancel_after"], tasks[i].cancel)))
        if spec["reprioritize_after"] is not None:
            helpers.append(
                asyncio.create_task(
                    later(
                        spec["reprioritize_after"],
                        lambda o=str(i): lm.set_priority(o, C.OP_PRIO_HIGHEST),
                    )
                )
            )
    _, pending = await asyncio.wait([*tasks, *helpers], timeout=5)
    assert not pending, "lock requests deadlocked"
    for task in tasks:
        if not task.cancelled():
            task.result()  # re-raise any invariant failure
    assert lm.info() == []
    for i in range(len(jobs)):
        for level in C.LOCK_LEVELS:
            assert lm.owned(str(i), level) == set()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_job, min_size=1, max_size=6))
def test_random_concurrent_use_never_deadlocks_nor_breaks_exclusivity(
    jobs: list[dict[str, Any]],
) -> None:
    asyncio.run(_simulate(jobs))
