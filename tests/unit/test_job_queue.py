"""JobQueue: submission, validation, scheduling limits, priorities and dependencies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from corral import constants as C
from corral import errors
from tests.unit.jobqueue_helpers import QueueHarness, delay, gated, jqueue, settle

# Submission


async def test_submit_returns_increasing_ids_and_runs_the_job(harness: QueueHarness) -> None:
    q = harness.queue
    first = await q.submit([jqueue()])
    second = await q.submit([delay(0.0), jqueue(log_messages=["x"])])
    assert (first, second) == (1, 2)
    assert await harness.wait_status(first) == "success"
    assert await harness.wait_status(second) == "success"
    assert await harness.row(second, "opstatus", "opresult") == [
        ["success", "success"],
        [None, True],
    ]
    assert await q.submit_many([[jqueue()], [jqueue()]]) == [[True, 3], [True, 4]]
    assert await harness.wait_status(3) == "success"
    assert await harness.wait_status(4) == "success"
    assert q.unfinished_count == 0
    assert harness.started == [1, 2, 2, 3, 4]


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        ({"OP_ID": "OP_TEST_DELAY", "duration": "soon"}, errors.OpPrereqError, "'duration'"),
        ([], errors.OpPrereqError, "A job must be a non-empty list of opcodes"),
        ([{"OP_ID": "OP_NOPE"}], errors.OpCodeUnknown, "Unknown opcode 'OP_NOPE'"),
        ("not a list", errors.OpPrereqError, "A job must be a non-empty list of opcodes"),
        (
            [jqueue(), {"OP_ID": "OP_TEST_JQUEUE", "bogus": 1}],
            errors.OpPrereqError,
            "unknown parameter 'bogus'",
        ),
    ],
)
async def test_submit_many_refuses_the_whole_batch_for_one_bad_job(
    harness: QueueHarness, bad: Any, error: type[Exception], message: str
) -> None:
    q = harness.queue
    bad_job = [bad] if isinstance(bad, dict) else bad
    with pytest.raises(error) as info:
        await q.submit_many([[jqueue()], bad_job, [jqueue()]])
    assert isinstance(info.value, errors.GenericError)
    assert info.value.message.startswith("Job 2 of 3 submitted: ")
    assert message in info.value.message
    assert not await harness.store.fetch(None, [])
    # No id was used up: the next job is the first.
    assert await q.submit_many([[jqueue()]]) == [[True, 1]]
    assert await harness.wait_status(1) == "success"


async def test_submit_raises_the_validation_error(harness: QueueHarness) -> None:
    q = harness.queue
    with pytest.raises(errors.OpPrereqError) as info:
        await q.submit([{"OP_ID": "OP_TEST_DELAY"}])
    assert info.value.ecode == C.ECODE_INVAL
    with pytest.raises(errors.OpCodeUnknown):
        await q.submit([{"OP_ID": "OP_NOPE"}])
    with pytest.raises(errors.OpPrereqError):
        await q.submit("OP_TEST_DELAY")
    # Nothing was stored.
    assert not await harness.store.fetch(None, [])


async def test_submit_many_needs_a_list(harness: QueueHarness) -> None:
    with pytest.raises(errors.LuxiError):
        await harness.queue.submit_many({"jobs": []})


async def test_reason_trail_records_job_and_index(harness: QueueHarness) -> None:
    job_id = await harness.queue.submit([jqueue(), delay(0.0)])
    await harness.wait_status(job_id)
    ops = (await harness.row(job_id, "ops"))[0]
    assert ops[0]["reason"][-1][:2] == ["gnt:opcode:test_jqueue", f"job={job_id};index=0"]
    assert ops[1]["reason"][-1][:2] == ["gnt:opcode:test_delay", f"job={job_id};index=1"]
    assert isinstance(ops[0]["reason"][-1][2], int)


async def test_failing_opcode_fails_the_rest_of_the_job(harness: QueueHarness) -> None:
    job_id = await harness.queue.submit([jqueue(), jqueue(fail=True), jqueue()])
    assert await harness.wait_status(job_id) == "error"
    opstatus, opresult = await harness.row(job_id, "opstatus", "opresult")
    assert opstatus == ["success", "error", "error"]
    assert opresult == [
        True,
        ["OpExecError", ["Opcode failure was requested"]],
        ["OpExecError", ["Preceding opcode failed"]],
    ]
    # The third opcode never reached the executor.
    assert harness.started == [job_id, job_id]


async def test_non_ganeti_exception_is_encoded_as_op_exec_error(harness: QueueHarness) -> None:
    async def broken(op: object, ctx: object) -> None:
        raise KeyError("oops")

    harness.queue._scheduler._execute = broken
    job_id = await harness.queue.submit([jqueue()])
    assert await harness.wait_status(job_id) == "error"
    assert (await harness.row(job_id, "opresult"))[0] == [["OpExecError", ["KeyError: 'oops'"]]]


# Scheduling


async def test_max_running_limit_is_respected(harness: QueueHarness) -> None:
    harness.max_running = 2
    ids = [await harness.queue.submit([gated(f"g{i}", running=True)]) for i in range(6)]
    await settle()
    assert harness.active == 2
    running = [await harness.status(i) for i in ids]
    assert running.count("running") == 2
    assert running.count("queued") == 4
    for index, job_id in enumerate(ids):
        harness.release(f"g{index}")
        assert await harness.wait_status(job_id) == "success"
    assert harness.peak == 2
    assert sorted(harness.started) == ids


async def test_jobs_start_by_priority_then_id(harness: QueueHarness) -> None:
    harness.max_running = 1
    blocker = await harness.queue.submit([gated("block", running=True)])
    await settle()
    low = await harness.queue.submit([jqueue(priority=C.OP_PRIO_LOW)])
    normal1 = await harness.queue.submit([jqueue()])
    high = await harness.queue.submit([jqueue(priority=C.OP_PRIO_HIGH)])
    normal2 = await harness.queue.submit([jqueue()])
    high2 = await harness.queue.submit([jqueue(priority=C.OP_PRIO_HIGH)])
    harness.release("block")
    for job_id in (low, normal1, high, normal2, high2):
        await harness.wait_status(job_id)
    assert harness.started == [blocker, high, high2, normal1, normal2, low]


async def test_job_priority_is_the_best_of_its_opcodes(harness: QueueHarness) -> None:
    harness.max_running = 1
    await harness.queue.submit([gated("block", running=True)])
    await settle()
    mixed = await harness.queue.submit(
        [jqueue(priority=C.OP_PRIO_LOW), jqueue(priority=C.OP_PRIO_HIGH)]
    )
    normal = await harness.queue.submit([jqueue()])
    assert await harness.row(mixed, "priority", "oppriority") == [C.OP_PRIO_HIGH, [10, -10]]
    harness.release("block")
    await harness.wait_status(normal)
    assert harness.started[1:] == [mixed, mixed, normal]


# Dependencies


async def test_relative_dependencies_in_submit_many(harness: QueueHarness) -> None:
    harness.max_running = 5
    results = await harness.queue.submit_many(
        [
            [gated("first", running=True)],
            [jqueue(depends=[[-1, ["success"]]])],
            [jqueue(depends=[[-2, []], [-1, ["success"]]])],
        ]
    )
    assert results == [[True, 1], [True, 2], [True, 3]]
    await settle()
    # Dependents wait without taking a running slot.
    assert harness.started == [1]
    assert await harness.status(2) == "waiting"
    assert await harness.status(3) == "waiting"
    ops2 = (await harness.row(2, "ops"))[0]
    ops3 = (await harness.row(3, "ops"))[0]
    assert ops2[0]["depends"] == [[1, ["success"]]]
    assert ops3[0]["depends"] == [[1, []], [2, ["success"]]]
    harness.release("first")
    assert await harness.wait_status(3) == "success"
    assert harness.started == [1, 2, 3]
    end1 = (await harness.row(1, "end_ts"))[0]
    start2 = (await harness.row(2, "opexec"))[0][0]
    assert tuple(start2) >= tuple(end1)


@pytest.mark.parametrize(
    "jobs",
    [
        [[jqueue(depends=[[-1, []]])]],  # nothing before it
        [[jqueue()], [jqueue(depends=[[-2, ["success"]]])]],  # before the submission
        [[jqueue()], [jqueue(depends=[[5, []]])]],  # a later job (by absolute id)
    ],
)
async def test_bad_dependencies_refuse_the_submission(
    harness: QueueHarness, jobs: list[list[dict[str, Any]]]
) -> None:
    with pytest.raises(errors.OpPrereqError, match="job"):
        await harness.queue.submit_many(jobs)
    assert not await harness.store.fetch(None, [])


async def test_relative_dependency_refused_in_a_single_job(harness: QueueHarness) -> None:
    with pytest.raises(errors.OpPrereqError, match="Relative job dependency"):
        await harness.queue.submit([jqueue(depends=[[-1, []]])])


async def test_dependency_status_rules(harness: QueueHarness) -> None:
    q = harness.queue
    failed = await q.submit([jqueue(fail=True)])
    await harness.wait_status(failed)
    wants_success = await q.submit([jqueue(depends=[[failed, ["success"]]])])
    wants_error = await q.submit([jqueue(depends=[[failed, ["error", "canceled"]]])])
    wants_any = await q.submit([jqueue(depends=[[failed, []]])])
    assert await harness.wait_status(wants_success) == "error"
    assert (await harness.row(wants_success, "opresult"))[0] == [
        [
            "OpExecError",
            [f"Dependency job {failed} finished with status 'error', not one of success"],
        ]
    ]
    assert await harness.wait_status(wants_error) == "success"
    assert await harness.wait_status(wants_any) == "success"
    assert wants_success not in harness.started


async def test_dependency_on_a_later_job_is_refused(harness: QueueHarness) -> None:
    # Only earlier jobs can be waited for, so dependencies can never form a cycle.
    with pytest.raises(errors.OpPrereqError, match="only earlier jobs"):
        await harness.queue.submit([jqueue(depends=[[999, []]])])
    first = await harness.queue.submit([jqueue()])
    with pytest.raises(errors.OpPrereqError, match="cannot depend on job"):
        await harness.queue.submit([jqueue(depends=[[first + 1, []]])])


async def test_dependency_on_an_archived_job_is_found(harness: QueueHarness) -> None:
    done = await harness.queue.submit([jqueue()])
    await harness.wait_status(done)
    assert await harness.queue.archive(done)
    job_id = await harness.queue.submit([jqueue(depends=[[done, ["success"]]])])
    assert await harness.wait_status(job_id) == "success"


async def test_waiting_dependents_leave_slots_to_other_jobs(harness: QueueHarness) -> None:
    harness.max_running = 2
    first = await harness.queue.submit([gated("first", running=True)])
    dependents = [await harness.queue.submit([jqueue(depends=[[first, []]])]) for _ in range(3)]
    independent = await harness.queue.submit([jqueue()])
    assert await harness.wait_status(independent) == "success"
    assert [await harness.status(d) for d in dependents] == ["waiting"] * 3
    harness.release("first")
    for dep in dependents:
        assert await harness.wait_status(dep) == "success"
    assert harness.peak <= 2


async def test_dependency_of_a_later_opcode_is_waited_for(harness: QueueHarness) -> None:
    first = await harness.queue.submit([gated("first", running=True)])
    job_id = await harness.queue.submit([jqueue(), jqueue(depends=[[first, ["success"]]])])
    await harness.wait_status(job_id, {"waiting"})
    assert (await harness.row(job_id, "opstatus"))[0] == ["success", "waiting"]
    # The later opcode's dependency is waited for inside the job's task.
    assert harness.active == 1 and harness.started == [first, job_id]  # only "first" executes
    harness.release("first")
    assert await harness.wait_status(job_id) == "success"
    assert harness.started == [first, job_id, job_id]


async def test_a_store_that_builds_the_rows_again_makes_each_job_once(
    harness: QueueHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = harness.store.insert_new

    async def retried(
        count: int, build: Callable[[list[int]], list[dict[str, Any]]], fence: int
    ) -> list[dict[str, Any]]:
        build(list(range(90, 90 + count)))  # an attempt whose ids another writer took
        return await original(count, build, fence)

    monkeypatch.setattr(harness.store, "insert_new", retried)
    results = await harness.queue.submit_many([[jqueue()], [jqueue(depends=[[-1, ["success"]]])]])
    assert results == [[True, 1], [True, 2]]
    assert await harness.wait_status(2) == "success"
    assert harness.started == [1, 2]  # each job made and run once
    ops1 = (await harness.row(1, "ops"))[0]
    ops2 = (await harness.row(2, "ops"))[0]
    assert [r[1] for r in ops1[0]["reason"] if r[0] == "gnt:opcode:test_jqueue"] == [
        "job=1;index=0"
    ]
    assert ops2[0]["depends"] == [[1, ["success"]]]  # not the failed attempt's 90
