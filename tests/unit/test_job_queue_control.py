"""JobQueue control: cancel, change_priority, archive, auto_archive and the drain flag."""

from __future__ import annotations

import asyncio
import time

import pytest

from corral import constants as C
from corral import errors
from tests.helpers.waiting import wait_until
from tests.unit.jobqueue_helpers import QueueHarness, delay, gated, jqueue, settle

# As Ganeti: a started job's canceled opcodes carry the reason; a dequeued
# job's none.
CANCELED_RESULT = "Job canceled by request"

# Cancel


async def test_cancel_of_a_queued_job(harness: QueueHarness) -> None:
    harness.max_running = 1
    blocker = await harness.queue.submit([gated("block", running=True)])
    job_id = await harness.queue.submit([jqueue(), jqueue()])
    await settle()
    assert await harness.status(job_id) == "queued"
    assert await harness.queue.cancel(job_id) == [True, f"Dequeued job {job_id}"]
    assert await harness.status(job_id) == "canceled"
    opstatus, opresult, end_ts, start_ts = await harness.row(
        job_id, "opstatus", "opresult", "end_ts", "start_ts"
    )
    assert opstatus == ["canceled", "canceled"]
    assert opresult == [None, None]
    assert end_ts is not None and start_ts is None
    harness.release("block")
    assert await harness.wait_status(blocker) == "success"
    await settle()
    assert job_id not in harness.started


async def test_cancel_of_a_job_scheduled_but_not_yet_started(harness: QueueHarness) -> None:
    harness.max_running = 1
    job_id = await harness.queue.submit([jqueue()])
    # Its task exists but has not run a single step yet.
    assert await harness.queue.cancel(job_id) == [True, f"Dequeued job {job_id}"]
    await settle()
    assert await harness.status(job_id) == "canceled"
    assert await harness.row(job_id, "opstatus") == [["canceled"]]
    assert harness.started == []
    assert harness.queue.unfinished_count == 0
    # Its running slot is free again.
    other = await harness.queue.submit([jqueue()])
    assert await harness.wait_status(other) == "success"


async def test_cancel_of_a_job_waiting_in_the_executor(harness: QueueHarness) -> None:
    job_id = await harness.queue.submit([gated("locks"), jqueue()])
    await harness.wait_status(job_id, {"waiting"})
    cancel = asyncio.create_task(harness.queue.cancel(job_id))
    await settle()
    # Until the executor notices, the opcodes are "canceling"; CancelJob waits.
    assert not cancel.done() or await harness.status(job_id) == "canceled"
    assert await cancel == [True, "Job successfully cancelled"]
    assert await harness.status(job_id) == "canceled"
    assert harness.cancelled == [job_id]
    opstatus, opresult = await harness.row(job_id, "opstatus", "opresult")
    assert opstatus == ["canceled", "canceled"]
    assert opresult == [CANCELED_RESULT, CANCELED_RESULT]
    assert harness.queue.unfinished_count == 0


async def test_cancel_of_a_job_waiting_for_dependencies(harness: QueueHarness) -> None:
    first = await harness.queue.submit([gated("first", running=True)])
    job_id = await harness.queue.submit([jqueue(depends=[[first, []]])])
    await harness.wait_status(job_id, {"waiting"})
    assert await harness.queue.cancel(job_id) == [True, "Job successfully cancelled"]
    assert await harness.status(job_id) == "canceled"
    assert await harness.row(job_id, "opresult") == [[CANCELED_RESULT]]
    harness.release("first")
    assert await harness.wait_status(first) == "success"
    await settle()
    assert job_id not in harness.started


async def test_cancel_of_a_running_job(harness: QueueHarness) -> None:
    job_id = await harness.queue.submit([gated("run", running=True)])
    await harness.wait_status(job_id, {"running"})
    assert await harness.queue.cancel(job_id) == [False, "Job no longer waiting, can't cancel"]
    assert await harness.status(job_id) == "running"
    # With kill, the running opcode is interrupted.
    assert await harness.queue.cancel(job_id, kill=True) == [True, "Job successfully cancelled"]
    assert await harness.status(job_id) == "canceled"
    assert harness.cancelled == [job_id]


async def test_cancel_of_finished_and_unknown_jobs(harness: QueueHarness) -> None:
    job_id = await harness.queue.submit([jqueue()])
    await harness.wait_status(job_id)
    # As luxid: a finished job is no longer in the queue.
    assert await harness.queue.cancel(job_id) == [False, f"Job {job_id} not found in queue"]
    assert await harness.status(job_id) == "success"
    assert await harness.queue.cancel(4242) == [False, "Job 4242 not found in queue"]


# Priorities


async def test_change_priority_of_a_queued_job_reorders_the_start(harness: QueueHarness) -> None:
    harness.max_running = 1
    blocker = await harness.queue.submit([gated("block", running=True)])
    await settle()
    first = await harness.queue.submit([jqueue()])
    second = await harness.queue.submit([jqueue()])
    assert harness.queue.change_priority(first, C.OP_PRIO_LOW) == [
        True,
        f"Priorities of pending opcodes for job {first} have been changed to 10",
    ]
    assert await harness.row(first, "priority", "oppriority") == [10, [10]]
    harness.release("block")
    await harness.wait_status(first)
    assert harness.started == [blocker, second, first]


async def test_raising_a_priority_moves_a_job_ahead(harness: QueueHarness) -> None:
    harness.max_running = 1
    blocker = await harness.queue.submit([gated("block", running=True)])
    await settle()
    first = await harness.queue.submit([jqueue()])
    second = await harness.queue.submit([jqueue()])
    harness.queue.change_priority(second, C.OP_PRIO_HIGH)
    harness.release("block")
    await harness.wait_status(first)
    assert harness.started == [blocker, second, first]


async def test_change_priority_of_a_started_job_reaches_the_lock_manager(
    harness: QueueHarness,
) -> None:
    job_id = await harness.queue.submit([gated("locks"), jqueue()])
    await harness.wait_status(job_id, {"waiting"})
    assert harness.queue.change_priority(job_id, -5)[0] is True
    assert harness.lock_priorities == [(str(job_id), -5)]
    assert await harness.row(job_id, "oppriority") == [[-5, -5]]
    harness.release("locks")
    assert await harness.wait_status(job_id) == "success"


async def test_change_priority_only_touches_unfinished_opcodes(harness: QueueHarness) -> None:
    job_id = await harness.queue.submit([jqueue(), gated("second")])
    await harness.wait_status(job_id, {"waiting"})
    harness.queue.change_priority(job_id, 7)
    assert await harness.row(job_id, "oppriority") == [[0, 7]]
    harness.release("second")
    await harness.wait_status(job_id)


async def test_change_priority_errors(harness: QueueHarness) -> None:
    with pytest.raises(errors.OpPrereqError) as info:
        harness.queue.change_priority(1, 20)
    assert info.value.ecode == C.ECODE_INVAL
    with pytest.raises(errors.OpPrereqError):
        harness.queue.change_priority(1, -21)
    assert harness.queue.change_priority(99, 0) == [False, "Job 99 not found in queue"]
    job_id = await harness.queue.submit([jqueue()])
    await harness.wait_status(job_id)
    assert harness.queue.change_priority(job_id, 0) == [False, f"Job {job_id} not found in queue"]


# Archive


async def test_archive(harness: QueueHarness) -> None:
    done = await harness.queue.submit([jqueue()])
    running = await harness.queue.submit([gated("run", running=True)])
    await harness.wait_status(done)
    await harness.wait_status(running, {"running"})
    assert await harness.queue.archive(running) is False
    assert await harness.queue.archive(done) is True
    assert await harness.queue.archive(done) is False
    assert await harness.queue.archive(777) is False
    # Gone from the live list, but still found by id (as archived).
    assert await harness.queue.queries.query_jobs(None, ["id"]) == [[running]]
    assert await harness.row(done, "id", "status", "archived") == [done, "success", True]
    assert await harness.row(running, "archived") == [False]
    harness.release("run")
    await harness.wait_status(running)


async def test_auto_archive(harness: QueueHarness) -> None:
    ids = [await harness.queue.submit([jqueue()]) for _ in range(3)]
    pending = await harness.queue.submit([gated("run", running=True)])
    for job_id in ids:
        await harness.wait_status(job_id)
    # Nothing is an hour old yet.
    assert await harness.queue.auto_archive(3600, 10) == [0, 0]
    assert len(await harness.queue.queries.query_jobs(None, ["id"])) == 4
    # Jobs that ended before "now - 0s": once the clock has passed their end.
    latest = max(
        sec + usec / 1e6 for sec, usec in [(await harness.row(i, "end_ts"))[0] for i in ids]
    )
    wait_until(lambda: time.time() > latest, what="the clock to pass the jobs' end")
    assert await harness.queue.auto_archive(0, 10) == [3, 0]
    assert await harness.queue.queries.query_jobs(None, ["id"]) == [[pending]]
    assert [(await harness.row(i, "archived"))[0] for i in ids] == [True, True, True]
    harness.release("run")
    await harness.wait_status(pending)
    assert await harness.queue.auto_archive(-1, 10) == [1, 0]
    assert await harness.queue.queries.query_jobs(None, ["id"]) == []


async def test_auto_archive_with_a_timeout_reports_what_is_left(harness: QueueHarness) -> None:
    results = await harness.queue.submit_many([[jqueue()] for _ in range(1100)])
    ids = [r[1] for r in results]
    await harness.wait_status(ids[-1])
    for job_id in ids:
        await harness.wait_status(job_id)
    # A zero timeout still archives one batch (of 1000), then stops.
    assert await harness.queue.auto_archive(-1, 0) == [1000, 100]
    assert await harness.queue.auto_archive(-1, 0) == [100, 0]


# Drain


async def test_drain_flag_refuses_submissions(harness: QueueHarness) -> None:
    q = harness.queue
    harness.drained = True
    with pytest.raises(errors.JobQueueDrainError):
        await q.submit([jqueue()])
    with pytest.raises(errors.JobQueueDrainError):
        await q.submit_many([[jqueue()]])
    assert not await harness.store.fetch(None, [])
    # The internal path ignores the flag.
    job_id = await q.submit([delay(0.0)], ignore_drain=True)
    assert await harness.wait_status(job_id) == "success"
    harness.drained = False
    assert await harness.wait_status(await q.submit([jqueue()])) == "success"


async def test_shut_down_queue_refuses_submissions(harness: QueueHarness) -> None:
    await harness.queue.shutdown(0)
    with pytest.raises(errors.JobQueueError, match="shutting down"):
        await harness.queue.submit([jqueue()])
