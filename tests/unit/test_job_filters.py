"""Job filter rules: which rule applies to a job (predicates, order) and what
the queue does with it (PAUSE, REJECT, RATE_LIMIT, ACCEPT, re-filtering)."""

from __future__ import annotations

from typing import Any

import pytest

from corral.jobs.filter_decode import normalise_action, normalise_predicate
from corral.jobs.filters import JobFilters
from corral.jobs.model import Job, QueuedOpCode
from corral.objects.base import new_uuid
from corral.objects.filter_rule import FilterRule
from corral.opcodes.base import from_dict
from tests.unit.jobqueue_helpers import QueueHarness, delay, gated, jqueue, settle


def rule(
    action: Any, *predicates: Any, priority: int = 0, watermark: int = 0, uuid: str = ""
) -> FilterRule:
    """A rule as ReplaceFilter stores it."""
    uuid = uuid or new_uuid()
    return FilterRule(
        uuid=uuid,
        name=uuid,
        watermark=watermark,
        priority=priority,
        predicates=[normalise_predicate(p) for p in predicates],
        action=normalise_action(action),
    )


def job(job_id: int, *ops: dict[str, Any]) -> Job:
    return Job(job_id, [QueuedOpCode(from_dict(op)) for op in ops or [delay(1.5)]])


def matches(predicate: Any, the_job: Job, watermark: int = 0) -> bool:
    applying = JobFilters([rule("PAUSE", predicate, watermark=watermark)]).applying(the_job)
    return applying is not None


# Predicates

JOBID_CASES = [
    (["jobid", [">", "id", "watermark"]], 11, True),
    (["jobid", [">", "id", "watermark"]], 10, False),
    (["jobid", ["<=", "id", "watermark"]], 10, True),
    (["jobid", ["=", "id", 7]], 7, True),
    (["jobid", ["!=", "id", 7]], 7, False),
    (["jobid", ["&", [">=", "id", 5], ["<", "id", 8]]], 7, True),
    (["jobid", None], 3, True),
    # Only comparisons on "id", against numbers or "watermark": anything else
    # makes the whole predicate false, even under a negation.
    (["jobid", ["?", "id"]], 7, False),
    (["jobid", ["!", ["?", "id"]]], 7, False),
    (["jobid", ["==", "status", 7]], 7, False),
    (["jobid", ["==", "id", "7"]], 7, False),
    (["jobid", ["!", ["==", "id", "seven"]]], 7, False),
    # Evaluation stops at the first operand that decides an "|" or "&".
    (["jobid", ["|", ["==", "id", 7], ["?", "id"]]], 7, True),
    (["jobid", ["|", ["==", "id", 8], ["?", "id"]]], 7, False),
    (["jobid", ["&", ["==", "id", 8], ["?", "id"]]], 7, False),
    (["jobid", ["|", ["?", "id"], ["==", "id", 7]]], 7, False),
]


@pytest.mark.parametrize(("predicate", "job_id", "expected"), JOBID_CASES)
def test_jobid_predicate(predicate: Any, job_id: int, expected: bool) -> None:
    assert matches(predicate, job(job_id), watermark=10) is expected


DELAY = {**delay(1.5), "on_nodes": ["node1", "node2"], "repeat": 3}
OPCODE_CASES = [
    (["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]], True),
    (["opcode", ["=", "OP_ID", "OP_TEST_JQUEUE"]], False),
    (["opcode", ["=~", "OP_ID", "DELAY$"]], True),
    (["opcode", ["=~", "OP_ID", "^DELAY"]], False),
    (["opcode", ["?", "on_master"]], True),
    (["opcode", ["!", ["?", "no_locks"]]], False),
    (["opcode", ["=[]", "on_nodes", "node2"]], True),
    (["opcode", ["=[]", "on_nodes", "node3"]], False),
    (["opcode", ["==", "repeat", 3]], True),
    (["opcode", [">", "duration", 1]], True),
    (["opcode", ["<", "duration", 2]], True),
    # JSON values of different kinds order null < bool < number < string < list.
    (["opcode", ["<", "repeat", "3"]], True),
    (["opcode", [">", "OP_ID", 99]], True),
    (["opcode", [">", "on_nodes", "zzz"]], True),
    # A field missing from the opcode (the common "meta" fields are) makes it false.
    (["opcode", ["|", ["=", "OP_ID", "OP_TEST_DELAY"], ["?", "nothere"]]], False),
    (["opcode", ["==", "priority", 0]], False),
    (["opcode", ["?", "OP_ID.inner"]], False),
    # Values of the wrong type for the operator make it false too.
    (["opcode", ["?", "repeat"]], False),
    (["opcode", ["=~", "repeat", "3"]], False),
    (["opcode", ["=[]", "on_nodes", 1]], False),
    (["opcode", ["=[]", "OP_ID", "x"]], False),
    (["opcode", ["|", ["?", "on_master"], ["?", "repeat"]]], True),
]


@pytest.mark.parametrize(("predicate", "expected"), OPCODE_CASES)
def test_opcode_predicate(predicate: Any, expected: bool) -> None:
    assert matches(predicate, job(5, DELAY)) is expected


def test_opcode_predicate_holds_if_one_opcode_matches() -> None:
    two = job(5, jqueue(), delay(0))
    assert matches(["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]], two)
    assert matches(["opcode", ["=", "OP_ID", "OP_TEST_JQUEUE"]], two)
    assert not matches(["opcode", ["=", "OP_ID", "OP_TAGS_SET"]], two)
    nested = job(5, {"OP_ID": "OP_TEST_JQUEUE", "log_messages": ["a", "b"]})
    assert matches(["opcode", ["=[]", "log_messages", "b"]], nested)


REASONS = [["gnt:user", "maintenance pink bunny", 1000], ["gnt:client:gnt-debug", "delay", 2000]]
REASON_CASES = [
    (["reason", ["=", "source", "gnt:user"]], True),
    (["reason", ["=", "reason", "delay"]], True),
    (["reason", ["&", ["=", "source", "gnt:user"], ["=", "reason", "delay"]]], False),
    (["reason", [">", "timestamp", 1500]], True),
    (["reason", [">", "timestamp", 2500]], False),
    # Filter values order strings before numbers.
    (["reason", ["<", "source", 0]], True),
    (["reason", [">", "timestamp", "x"]], True),
    # Only comparisons on source, reason and timestamp.
    (["reason", ["=~", "reason", "pink"]], False),
    (["reason", ["?", "reason"]], False),
    (["reason", ["=", "text", "delay"]], False),
]


@pytest.mark.parametrize(("predicate", "expected"), REASON_CASES)
def test_reason_predicate(predicate: Any, expected: bool) -> None:
    assert matches(predicate, job(5, delay(0, reason=REASONS))) is expected


def test_reason_predicate_sees_every_opcodes_trail() -> None:
    two = job(5, delay(0, reason=[["a", "x", 1]]), delay(0, reason=[["b", "y", 2]]))
    assert matches(["reason", ["=", "source", "b"]], two)
    assert not matches(["reason", ["=", "source", "c"]], two)


def test_all_predicates_must_match_and_none_match_everything() -> None:
    target = job(12, delay(0, reason=REASONS))
    by_id = ["jobid", [">", "id", "watermark"]]
    by_op = ["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]
    filters = JobFilters([rule("PAUSE", by_id, by_op, watermark=10)])
    assert filters.applying(target) is not None
    filters = JobFilters([rule("PAUSE", by_id, by_op, watermark=12)])
    assert filters.applying(target) is None
    assert JobFilters([rule("PAUSE")]).applying(target) is not None


# Which rule applies


def test_rules_apply_by_priority_then_watermark_then_uuid() -> None:
    target = job(5)
    low_uuid = "00000000-0000-4000-8000-000000000000"
    high_uuid = "ffffffff-0000-4000-8000-000000000000"
    rules = [
        rule("REJECT", priority=2, watermark=0),
        rule("PAUSE", priority=1, watermark=9, uuid=low_uuid),
        rule("ACCEPT", priority=1, watermark=9, uuid=high_uuid),
        rule(["RATE_LIMIT", 1], priority=1, watermark=10),
    ]
    applying = JobFilters(rules).applying(target)
    assert applying is not None and applying.uuid == low_uuid
    applying = JobFilters(rules[2:]).applying(target)
    assert applying is not None and applying.uuid == high_uuid


def test_continue_rules_never_apply() -> None:
    target = job(5)
    accept = rule("ACCEPT", priority=5)
    filters = JobFilters([rule("CONTINUE", priority=0), accept])
    applying = filters.applying(target)
    assert applying is not None and applying.uuid == accept.uuid
    assert JobFilters([rule("CONTINUE")]).applying(target) is None
    assert not JobFilters() and JobFilters().gate([]) is None


def test_first_matching_rule_applies_even_if_a_later_one_would_reject() -> None:
    maintenance = ["reason", ["=", "reason", "maintenance pink bunny"]]
    filters = JobFilters(
        [rule("ACCEPT", maintenance, priority=0), rule("REJECT", ["jobid", None], priority=1)]
    )
    assert filters.rejecting(job(5, delay(0, reason=REASONS))) is None
    assert filters.rejecting(job(6)) is not None


# The queue


async def test_pause_holds_queued_jobs_until_the_rule_goes(harness: QueueHarness) -> None:
    paused = rule("PAUSE", ["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]])
    harness.queue.set_filter_rules([paused])
    held = await harness.queue.submit([delay(0)])
    other = await harness.queue.submit([jqueue()])
    assert await harness.wait_status(other) == "success"
    await settle()
    assert await harness.status(held) == "queued" and held not in harness.started
    harness.queue.set_filter_rules([])
    assert await harness.wait_status(held) == "success"


async def test_paused_jobs_take_no_running_slot(harness: QueueHarness) -> None:
    harness.max_running = 1
    harness.queue.set_filter_rules([rule("PAUSE", ["jobid", ["<", "id", 3]])])
    first, second = await harness.queue.submit([jqueue()]), await harness.queue.submit([jqueue()])
    third = await harness.queue.submit([jqueue()])
    assert await harness.wait_status(third) == "success"
    assert await harness.status(first) == await harness.status(second) == "queued"
    harness.queue.set_filter_rules([])
    assert await harness.wait_status(first) == "success"
    assert await harness.wait_status(second) == "success"


async def test_reject_cancels_new_jobs_as_luxid_does(harness: QueueHarness) -> None:
    harness.max_running = 1
    blocker = await harness.queue.submit([gated("block", running=True)])
    harness.queue.set_filter_rules([rule("REJECT", ["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]])])
    # Rejected at submission, although no running slot is free.
    rejected = await harness.queue.submit([delay(0), delay(0)])
    assert await harness.row(rejected, "status", "opstatus", "opresult", "start_ts") == [
        "canceled",
        ["canceled", "canceled"],
        [None, None],
        None,
    ]
    (end_ts,) = await harness.row(rejected, "end_ts")
    assert end_ts is not None
    assert harness.queue.unfinished_count == 1
    harness.release("block")
    assert await harness.wait_status(blocker) == "success"
    assert rejected not in harness.started


async def test_new_rules_refilter_queued_jobs_not_running_ones(harness: QueueHarness) -> None:
    harness.max_running = 1
    running = await harness.queue.submit([gated("run", running=True)])
    queued = await harness.queue.submit([jqueue()])
    waiting = await harness.queue.submit([jqueue(depends=[[queued, []]])])
    await harness.wait_status(running, {"running"})
    harness.queue.set_filter_rules([rule("REJECT")])
    assert await harness.status(queued) == await harness.status(waiting) == "canceled"
    assert await harness.status(running) == "running"
    harness.release("run")
    assert await harness.wait_status(running) == "success"


async def test_rate_limit_counts_the_jobs_it_applies_to(harness: QueueHarness) -> None:
    limit = rule(["RATE_LIMIT", 2], ["reason", ["=", "reason", "limited"]])
    harness.queue.set_filter_rules([limit])
    limited = [["test", "limited", 1]]
    first = await harness.queue.submit([gated("a", running=True, reason=limited)])
    second = await harness.queue.submit([gated("b", running=True, reason=limited)])
    third = await harness.queue.submit([gated("c", running=True, reason=limited)])
    free = await harness.queue.submit([jqueue()])
    assert await harness.wait_status(free) == "success"
    await harness.wait_status(second, {"running"})
    assert await harness.status(first) == "running" and await harness.status(third) == "queued"
    harness.release("c")
    harness.release("a")
    assert await harness.wait_status(first) == "success"
    assert await harness.wait_status(third) == "success"
    harness.release("b")
    assert await harness.wait_status(second) == "success"


async def test_rate_limit_counts_jobs_running_before_the_rule(harness: QueueHarness) -> None:
    before = [await harness.queue.submit([gated(f"g{i}", running=True)]) for i in range(3)]
    for job_id in before:
        await harness.wait_status(job_id, {"running"})
    harness.queue.set_filter_rules([rule(["RATE_LIMIT", 2])])
    later = await harness.queue.submit([jqueue()])
    await settle()
    assert await harness.status(later) == "queued"
    harness.release("g0")
    assert await harness.wait_status(before[0]) == "success"
    await settle()
    assert await harness.status(later) == "queued"
    harness.release("g1")
    assert await harness.wait_status(later) == "success"
    harness.release("g2")
    assert await harness.wait_status(before[2]) == "success"


async def test_accept_before_pause_lets_chosen_jobs_through(harness: QueueHarness) -> None:
    maintenance = ["reason", ["=", "reason", "pink bunny"]]
    harness.queue.set_filter_rules(
        [rule("PAUSE", priority=1), rule("ACCEPT", maintenance, priority=0)]
    )
    chosen = await harness.queue.submit([jqueue(reason=[["gnt:user", "pink bunny", 1]])])
    other = await harness.queue.submit([jqueue()])
    assert await harness.wait_status(chosen) == "success"
    assert await harness.status(other) == "queued"
    harness.queue.set_filter_rules([])
    assert await harness.wait_status(other) == "success"


async def test_watermark_spares_jobs_older_than_the_rule(harness: QueueHarness) -> None:
    harness.queue.set_filter_rules([rule("PAUSE", ["opcode", ["?", "fail"]])])
    old = await harness.queue.submit([jqueue(fail=True)])
    drain = rule("PAUSE", ["jobid", [">", "id", "watermark"]], watermark=harness.queue.last_job_id)
    assert drain.watermark == old
    harness.queue.set_filter_rules([drain])
    new = await harness.queue.submit([jqueue()])
    assert await harness.wait_status(old) == "error"
    await settle()
    assert await harness.status(new) == "queued"
    harness.queue.set_filter_rules([])
    assert await harness.wait_status(new) == "success"
