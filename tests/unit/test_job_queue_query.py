"""JobQueue queries: Query("job") / QueryJobs field values and WaitForJobChange."""

from __future__ import annotations

import asyncio
import time

import pytest

from corral import constants as C
from corral import errors
from tests.unit.jobqueue_helpers import QueueHarness, delay, gated, jqueue, settle

ALL_FIELDS = [
    "id",
    "status",
    "priority",
    "archived",
    "ops",
    "opresult",
    "opstatus",
    "oplog",
    "opstart",
    "opexec",
    "opend",
    "oppriority",
    "received_ts",
    "start_ts",
    "end_ts",
    "summary",
]


def as_float(ts: list[int]) -> float:
    return ts[0] + ts[1] / 1e6


def assert_ts(value: object, low: float, high: float) -> None:
    assert isinstance(value, list) and len(value) == 2
    sec, usec = value
    assert isinstance(sec, int) and isinstance(usec, int)
    assert 0 <= usec < 1_000_000
    assert low - 1e-6 <= as_float(value) <= high + 1e-6


# Query / QueryJobs


async def test_query_field_values_of_a_finished_job(harness: QueueHarness) -> None:
    before = time.time()
    job_id = await harness.queue.submit(
        [jqueue(log_messages=["hello", "world"]), delay(0.0, priority=C.OP_PRIO_LOW)]
    )
    assert await harness.wait_status(job_id) == "success"
    after = time.time()
    result = await harness.queue.queries.query([*ALL_FIELDS, "reason"], None)
    kinds = {f["name"]: f["kind"] for f in result["fields"]}
    assert kinds == {
        "id": "number",
        "status": "text",
        "priority": "number",
        "archived": "bool",
        "ops": "other",
        "opresult": "other",
        "opstatus": "other",
        "oplog": "other",
        "opstart": "other",
        "opexec": "other",
        "opend": "other",
        "oppriority": "other",
        "received_ts": "other",
        "start_ts": "other",
        "end_ts": "other",
        "summary": "other",
        "reason": "unknown",
    }
    assert len(result["data"]) == 1
    row = result["data"][0]
    assert all(cell[0] == C.RS_NORMAL for cell in row[:-1]), row
    assert row[-1] == [C.RS_UNKNOWN, None]
    v = dict(zip(ALL_FIELDS, (cell[1] for cell in row), strict=False))

    assert v["id"] == job_id
    assert v["status"] == "success"
    assert v["priority"] == 0  # finished: the default
    assert v["archived"] is False
    assert v["summary"] == ["TEST_JQUEUE", "TEST_DELAY(0.0)"]
    assert [op["OP_ID"] for op in v["ops"]] == ["OP_TEST_JQUEUE", "OP_TEST_DELAY"]
    assert v["ops"][0]["log_messages"] == ["hello", "world"]
    assert v["ops"][1]["priority"] == C.OP_PRIO_LOW
    assert v["opstatus"] == ["success", "success"]
    assert v["opresult"] == [True, None]
    assert v["oppriority"] == [0, 10]
    log0, log1 = v["oplog"]
    assert [(e[0], e[2], e[3]) for e in log0] == [
        (1, "message", "TESTMSG=hello"),
        (2, "message", "TESTMSG=world"),
    ]
    assert [(e[0], e[2], e[3]) for e in log1] == [(3, "message", "Sleeping 0.0")]
    for entry in log0 + log1:
        assert_ts(entry[1], before, after)
    assert_ts(v["received_ts"], before, after)
    assert_ts(v["start_ts"], before, after)
    assert_ts(v["end_ts"], before, after)
    assert as_float(v["received_ts"]) <= as_float(v["start_ts"]) <= as_float(v["end_ts"])
    for i in range(2):
        assert_ts(v["opstart"][i], before, after)
        assert_ts(v["opexec"][i], before, after)
        assert_ts(v["opend"][i], before, after)
        assert as_float(v["opstart"][i]) <= as_float(v["opexec"][i]) <= as_float(v["opend"][i])
    assert as_float(v["opend"][0]) <= as_float(v["opstart"][1])


async def test_query_of_an_unfinished_job(harness: QueueHarness) -> None:
    job_id = await harness.queue.submit([gated("run", running=True), jqueue()])
    await harness.wait_status(job_id, {"running"})
    fields = ["status", "opstatus", "opresult", "opexec", "opend", "end_ts", "priority"]
    row = await harness.row(job_id, *fields)
    assert row[:3] == ["running", ["running", "queued"], [None, None]]
    assert row[3][0] is not None and row[3][1] is None
    assert row[4] == [None, None]
    assert row[5] is None
    assert row[6] == 0
    harness.release("run")
    await harness.wait_status(job_id)


async def test_query_filter(harness: QueueHarness) -> None:
    ok = await harness.queue.submit([jqueue()])
    bad = await harness.queue.submit([jqueue(fail=True)])
    running = await harness.queue.submit([gated("run", running=True)])
    await harness.wait_status(bad)
    await harness.wait_status(running, {"running"})

    async def ids(qfilter: object) -> list[int]:
        return [row[0][1] for row in (await harness.queue.queries.query(["id"], qfilter))["data"]]

    assert await ids(None) == [ok, bad, running]
    assert await ids(["==", "status", "error"]) == [bad]
    assert await ids(["|", ["==", "id", ok], ["==", "id", running]]) == [ok, running]
    assert await ids(["=[]", "summary", "TEST_JQUEUE"]) == [ok, bad, running]
    assert await ids(["!", ["=[]", "opstatus", "success"]]) == [bad, running]
    with pytest.raises(errors.QueryFilterParseError):
        await harness.queue.queries.query(["id"], ["==", "nosuch", 1])
    harness.release("run")
    await harness.wait_status(running)


async def test_query_asking_for_archived_includes_the_archive(harness: QueueHarness) -> None:
    first = await harness.queue.submit([jqueue()])
    second = await harness.queue.submit([jqueue()])
    await harness.wait_status(second)
    await harness.wait_status(first)
    await harness.queue.archive(first)
    plain = await harness.queue.queries.query(["id", "status"], None)
    assert [row[0][1] for row in plain["data"]] == [second]
    with_archive = await harness.queue.queries.query(["id", "archived"], None)
    assert with_archive["data"] == [[[0, first], [0, True]], [[0, second], [0, False]]]


async def test_query_jobs(harness: QueueHarness) -> None:
    first = await harness.queue.submit([jqueue()])
    second = await harness.queue.submit([jqueue()])
    await harness.wait_status(second)
    await harness.wait_status(first)
    q = harness.queue.queries
    assert await q.query_jobs(None, ["id", "status"]) == [[first, "success"], [second, "success"]]
    assert await q.query_jobs([], ["id"]) == [[first], [second]]
    # As luxid: a row for every id asked for; of an unknown job only its id.
    assert await q.query_jobs([second, 999, first], ["id", "summary"]) == [
        [second, ["TEST_JQUEUE"]],
        [999, None],
        [first, ["TEST_JQUEUE"]],
    ]
    assert await q.query_jobs([first], []) == [[]]
    with pytest.raises(errors.OpPrereqError) as info:
        await q.query_jobs([first], ["id", "bogus", "worse"])
    assert info.value.ecode == C.ECODE_INVAL
    assert "bogus, worse" in info.value.args[0]


# WaitForJobChange


async def test_wfjc_returns_at_once_when_the_info_differs(harness: QueueHarness) -> None:
    job_id = await harness.queue.submit([gated("run", running=True, log_messages=["x"])])
    await harness.wait_status(job_id, {"running"})
    start = time.monotonic()
    result = await harness.queue.queries.wait_for_change(job_id, ["status"], None, None, 10)
    assert result == [["running"], []]
    result = await harness.queue.queries.wait_for_change(
        job_id, ["status", "id"], ["waiting"], 0, 10
    )
    assert result == [["running", job_id], []]
    assert time.monotonic() - start < 1
    harness.release("run")
    await harness.wait_status(job_id)


async def test_wfjc_returns_new_log_entries_even_if_the_info_is_the_same(
    harness: QueueHarness,
) -> None:
    job_id = await harness.queue.submit([jqueue(log_messages=["a"]), gated("g", running=True)])
    await harness.wait_status(job_id, {"running"})
    info, entries = await harness.queue.queries.wait_for_change(
        job_id, ["status"], ["running"], 0, 10
    )
    assert info == ["running"]
    assert [(e[0], e[2], e[3]) for e in entries] == [(1, "message", "TESTMSG=a")]
    assert isinstance(entries[0][1], list) and len(entries[0][1]) == 2
    harness.release("g")
    await harness.wait_status(job_id)


async def test_wfjc_wakes_a_waiter_on_change(harness: QueueHarness) -> None:
    job_id = await harness.queue.submit([gated("run", running=True, log_messages=["done"])])
    await harness.wait_status(job_id, {"running"})
    waiter = asyncio.create_task(
        harness.queue.queries.wait_for_change(job_id, ["status"], ["running"], 0, 10)
    )
    await settle()
    assert not waiter.done()
    harness.release("run")
    result = await asyncio.wait_for(waiter, 2)
    info, entries = result
    assert info == ["success"]
    assert [(e[0], e[2], e[3]) for e in entries] == [(1, "message", "TESTMSG=done")]


async def test_wfjc_times_out_with_nochange(harness: QueueHarness) -> None:
    job_id = await harness.queue.submit([gated("run", running=True)])
    await harness.wait_status(job_id, {"running"})
    start = time.monotonic()
    result = await harness.queue.queries.wait_for_change(job_id, ["status"], ["running"], 0, 0.05)
    assert result == "nochange"
    assert time.monotonic() - start >= 0.04
    assert (
        await harness.queue.queries.wait_for_change(job_id, ["status"], ["running"], 0, 0)
        == "nochange"
    )
    # A change that does not touch the asked fields does not end the wait.
    waiter = asyncio.create_task(
        harness.queue.queries.wait_for_change(job_id, ["status"], ["running"], 0, 0.1)
    )
    await settle()
    harness.queue.change_priority(job_id, 3)
    assert await waiter == "nochange"
    harness.release("run")
    await harness.wait_status(job_id)


async def test_wfjc_timeout_is_capped(
    harness: QueueHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(C, "LUXI_WFJC_TIMEOUT", 0.05)
    job_id = await harness.queue.submit([gated("run", running=True)])
    await harness.wait_status(job_id, {"running"})
    start = time.monotonic()
    result = await harness.queue.queries.wait_for_change(job_id, ["status"], ["running"], 0, 3600)
    assert result == "nochange"
    assert time.monotonic() - start < 1
    harness.release("run")
    await harness.wait_status(job_id)


async def test_wfjc_one_change_wakes_100_waiters(harness: QueueHarness) -> None:
    job_id = await harness.queue.submit([gated("locks")])
    await harness.wait_status(job_id, {"waiting"})
    waiters = [
        asyncio.create_task(harness.queue.queries.wait_for_change(job_id, ["priority"], [0], 0, 10))
        for _ in range(100)
    ]
    await settle()
    assert not any(w.done() for w in waiters)
    harness.queue.change_priority(job_id, C.OP_PRIO_HIGH)
    results = await asyncio.wait_for(asyncio.gather(*waiters), 2)
    assert results == [[[C.OP_PRIO_HIGH], []]] * 100
    harness.release("locks")
    await harness.wait_status(job_id)


async def test_wfjc_of_a_finished_job_returns_at_once(harness: QueueHarness) -> None:
    job_id = await harness.queue.submit([jqueue(log_messages=["a", "b"])])
    await harness.wait_status(job_id)
    start = time.monotonic()
    info, entries = await harness.queue.queries.wait_for_change(
        job_id, ["status", "opstatus"], ["success", ["success"]], 1, 10
    )
    assert time.monotonic() - start < 1
    assert info == ["success", ["success"]]
    assert [(e[0], e[2], e[3]) for e in entries] == [(2, "message", "TESTMSG=b")]
    # Also once archived.
    await harness.queue.archive(job_id)
    info, entries = await harness.queue.queries.wait_for_change(job_id, ["status"], None, None, 10)
    assert info == ["success"]
    assert [e[0] for e in entries] == [1, 2]


async def test_wfjc_of_an_unknown_job_is_job_lost(harness: QueueHarness) -> None:
    with pytest.raises(errors.JobLost):
        await harness.queue.queries.wait_for_change(12345, ["status"], None, None, 1)


async def test_wfjc_with_unknown_fields_is_wrong_input(harness: QueueHarness) -> None:
    running = await harness.queue.submit([gated("run", running=True)])
    done = await harness.queue.submit([jqueue()])
    await harness.wait_status(done)
    await harness.wait_status(running, {"running"})
    for job_id in (running, done):
        with pytest.raises(errors.OpPrereqError):
            await harness.queue.queries.wait_for_change(job_id, ["status", "bogus"], None, None, 1)
    harness.release("run")
    await harness.wait_status(running)


async def test_wfjc_info_matches_query_jobs(harness: QueueHarness) -> None:
    fields = ["id", "status", "opstatus", "opresult", "oplog", "summary", "received_ts", "ops"]
    job_id = await harness.queue.submit([jqueue(log_messages=["m"]), gated("g", running=True)])
    # The second opcode runs (the first one ran, and was "running" too, a while).
    await harness.wait_opstatus(job_id, ["success", "running"])
    info, _ = await harness.queue.queries.wait_for_change(job_id, fields, None, None, 1)
    assert info == await harness.row(job_id, *fields)
    # Feeding the answer back waits (nothing changed), as a polling client does.
    assert await harness.queue.queries.wait_for_change(job_id, fields, info, 1, 0.02) == "nochange"
    harness.release("g")
    await harness.wait_status(job_id)
