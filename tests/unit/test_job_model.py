"""Tests of job status rules, timestamps, stored rows, recovery decisions and the JobStore."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral import constants as C
from corral.jobs import records
from corral.jobs.model import Job, LogEntry, QueuedOpCode, calc_priority, split_time
from corral.jobs.states import job_status as calc_status
from corral.opcodes.test import OpTestDelay, OpTestJqueue
from corral.state.sqlite.jobs import SqliteJobStore

Q, W, CG, R, CD, S, E = (
    C.OP_STATUS_QUEUED,
    C.OP_STATUS_WAITING,
    C.OP_STATUS_CANCELING,
    C.OP_STATUS_RUNNING,
    C.OP_STATUS_CANCELED,
    C.OP_STATUS_SUCCESS,
    C.OP_STATUS_ERROR,
)
ALL_OP_STATUSES = [Q, W, CG, R, CD, S, E]


def ganeti_calc_status(statuses: list[str]) -> str:
    """Ganeti's _QueuedJob.CalcStatus, transcribed as a reference."""
    status = C.JOB_STATUS_QUEUED
    all_success = True
    for op_status in statuses:
        if op_status == S:
            continue
        all_success = False
        if op_status == Q:
            pass
        elif op_status == W:
            status = C.JOB_STATUS_WAITING
        elif op_status == R:
            status = C.JOB_STATUS_RUNNING
        elif op_status == CG:
            status = C.JOB_STATUS_CANCELING
            break
        elif op_status == E:
            status = C.JOB_STATUS_ERROR
            break
        elif op_status == CD:
            status = C.JOB_STATUS_CANCELED
            break
    if all_success:
        status = C.JOB_STATUS_SUCCESS
    return status


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([Q], "queued"),
        ([Q, Q], "queued"),
        ([S, Q], "queued"),
        ([S, S], "success"),
        ([S], "success"),
        ([W, Q], "waiting"),
        ([S, R, Q], "running"),
        ([S, E, E], "error"),
        ([E, S], "error"),
        ([CD, CD], "canceled"),
        ([S, CG, CG], "canceling"),
        # Canceling, error and canceled end the evaluation at once.
        ([CG, E], "canceling"),
        ([CG, R], "canceling"),
        ([E, R], "error"),
        ([CD, W], "canceled"),
        # Waiting/running: the last one seen counts.
        ([R, W], "waiting"),
        ([W, R], "running"),
    ],
)
def test_calc_status_by_ganeti_rules(statuses: list[str], expected: str) -> None:
    assert calc_status(statuses) == expected


@given(st.lists(st.sampled_from(ALL_OP_STATUSES), min_size=1, max_size=6))
def test_calc_status_matches_ganeti_for_any_combination(statuses: list[str]) -> None:
    assert calc_status(statuses) == ganeti_calc_status(statuses)


def _qop(status: str, priority: int) -> QueuedOpCode:
    return QueuedOpCode(OpTestDelay(duration=0.0), status=status, priority=priority)


def test_calc_priority_is_the_best_unfinished_priority() -> None:
    assert calc_priority([_qop(S, -20), _qop(Q, 5), _qop(Q, 10)]) == 5
    assert calc_priority([_qop(R, 3), _qop(Q, -1)]) == -1


def test_calc_priority_of_a_finished_job_is_the_default() -> None:
    # Ganeti (luxid's calcJobPriority) gives OP_PRIO_DEFAULT when no opcode is pending.
    assert calc_priority([_qop(S, -10), _qop(E, 10)]) == C.OP_PRIO_NORMAL
    assert calc_priority([]) == C.OP_PRIO_NORMAL


@pytest.mark.parametrize(
    ("ts", "expected"),
    [
        (None, None),
        (0.0, [0, 0]),
        (1.5, [1, 500000]),
        (1610618400.123456, [1610618400, 123456]),
        (1.9999997, [2, 0]),
        (1610618400.9999999, [1610618401, 0]),
    ],
)
def test_split_time(ts: float | None, expected: list[int] | None) -> None:
    assert split_time(ts) == expected


@given(st.floats(min_value=0, max_value=4e9, allow_nan=False))
def test_split_time_gives_seconds_and_microseconds(ts: float) -> None:
    sec, usec = split_time(ts)  # type: ignore[misc]
    assert isinstance(sec, int) and isinstance(usec, int)
    assert 0 <= usec < 1_000_000
    assert abs(sec + usec / 1e6 - ts) <= 1e-6 + abs(ts) * 1e-15


def test_log_entry_wire_form() -> None:
    assert LogEntry(3, 10.25, "message", "hi").to_wire() == [3, [10, 250000], "message", "hi"]


# Rows and recovery


def _job(*statuses: str) -> Job:
    ops = [
        QueuedOpCode(OpTestJqueue(log_messages=[f"op{i}"]), status=status, priority=i)
        for i, status in enumerate(statuses)
    ]
    return Job(17, ops, received_timestamp=100.0, start_timestamp=101.0)


def test_job_row_and_back() -> None:
    job = _job(S, R, Q)
    job.ops[0].result = True
    job.ops[0].end_timestamp = 102.0
    job.log_serial = 4
    row = records.job_row(job)
    assert row["status"] == "running"
    assert row["priority"] == 1
    assert row["summary"] == ["TEST_JQUEUE", "TEST_JQUEUE", "TEST_JQUEUE"]
    assert row["ops"][0]["input"]["OP_ID"] == "OP_TEST_JQUEUE"
    assert row["ops"][0]["input"]["log_messages"] == ["op0"]
    back = records.job_from_row(row)
    assert back.id == 17
    assert [op.status for op in back.ops] == [S, R, Q]
    assert [op.input for op in back.ops] == [op.input for op in job.ops]
    assert back.ops[0].result is True
    assert back.ops[0].end_timestamp == 102.0
    assert (back.received_timestamp, back.start_timestamp, back.log_serial) == (100.0, 101.0, 4)


def test_recover_running_op_becomes_error_and_the_rest_fail() -> None:
    job = _job(S, R, Q)
    records.recover_job(job)
    assert [op.status for op in job.ops] == [S, E, E]
    assert job.ops[1].result == ["OpExecError", ["Unclean master daemon shutdown"]]
    assert job.ops[2].result == ["OpExecError", ["Preceding opcode failed"]]
    assert job.status == "error"
    assert job.end_timestamp is not None


def test_recover_canceling_op_becomes_canceled() -> None:
    job = _job(CG, CG)
    records.recover_job(job)
    assert job.ops[0].status == CD
    assert job.status == "canceled"
    assert job.end_timestamp is not None


def test_recover_waiting_and_queued_ops_are_queued_again() -> None:
    job = _job(S, W, Q)
    records.recover_job(job)
    assert [op.status for op in job.ops] == [S, Q, Q]
    assert job.status == "queued"
    assert job.end_timestamp is None


# JobStore


def _row(job_id: int, status: str = "queued", end: float | None = None) -> dict[str, Any]:
    return {
        "id": job_id,
        "status": status,
        "priority": 0,
        "summary": ["TEST_DELAY(1.0)"],
        "received_ts": 1.0,
        "start_ts": None,
        "end_ts": end,
        "ops": [{"input": {"OP_ID": "OP_TEST_DELAY", "duration": 1.0}, "status": status}],
        "log_serial": 0,
    }


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteJobStore]:
    s = SqliteJobStore(tmp_path / "jobs.db")
    yield s
    await s.close()


async def test_store_is_in_wal_mode(store: SqliteJobStore, tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "jobs.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_allocate_ids_is_transactional(store: SqliteJobStore) -> None:
    assert [r["id"] for r in await store.insert_new(3, lambda ids: [_row(i) for i in ids], 0)] == [
        1,
        2,
        3,
    ]

    def refuse(ids: list[int]) -> list[dict[str, Any]]:
        assert ids == [4, 5]
        raise ValueError("refused")

    with pytest.raises(ValueError):
        await store.insert_new(2, refuse, 0)
    assert [r["id"] for r in await store.insert_new(1, lambda ids: [_row(i) for i in ids], 0)] == [
        4
    ]


async def test_store_insert_update_and_fetch(store: SqliteJobStore) -> None:
    await store.insert_new(2, lambda ids: [_row(i) for i in ids], 0)
    row = _row(2, "success", end=5.0)
    row["log_serial"] = 1
    await store.write_batch([row], [(2, 0, 1, 4.5, "message", {"nested": ["x", 1]})], 0)
    assert await store.fetch(None, ["status", "end_ts"]) == [
        {"id": 1, "status": "queued", "end_ts": None, "archived": 0},
        {"id": 2, "status": "success", "end_ts": 5.0, "archived": 0},
    ]
    assert await store.fetch([2], ["summary", "ops", "log_serial"]) == [
        {
            "id": 2,
            "summary": ["TEST_DELAY(1.0)"],
            "ops": row["ops"],
            "log_serial": 1,
            "archived": 0,
        }
    ]
    assert await store.fetch([3], ["status"]) == []
    assert await store.fetch_logs(2) == [(0, [1, 4.5, "message", {"nested": ["x", 1]}])]
    assert await store.fetch_logs(2, after=1) == []
    assert await store.unfinished_ids() == [1]


async def test_store_archive_moves_jobs_and_logs(store: SqliteJobStore) -> None:
    rows = [_row(1, "success", 10.0), _row(2, "error", 20.0), _row(3)]
    await store.insert_new(3, lambda ids: rows, 0)
    await store.write_batch([], [(1, 0, 1, 9.0, "message", "hello")], 0)
    assert await store.archive([3], 0) == 0  # not finished: stays in the queue
    assert await store.finished_before(15.0) == [1]
    assert await store.finished_before(None) == [1, 2]
    assert await store.archive([1, 99], 0) == 1
    assert await store.archive([], 0) == 0
    assert [r["id"] for r in await store.fetch(None, [])] == [2, 3]
    assert await store.fetch([1], ["status"]) == []
    assert await store.fetch([1, 2], ["status"], archived=True) == [
        {"id": 1, "status": "success", "archived": 1},
        {"id": 2, "status": "error", "archived": 0},
    ]
    assert await store.fetch_logs(1) == []
    assert await store.fetch_logs(1, archived=True) == [(0, [1, 9.0, "message", "hello"])]
    assert await store.finished_before(None) == [2]


async def test_store_fetch_many_ids(store: SqliteJobStore) -> None:
    await store.insert_new(1200, lambda ids: [_row(i) for i in ids], 0)
    rows = await store.fetch(list(range(1, 1201, 2)), ["status"])
    assert [r["id"] for r in rows] == list(range(1, 1201, 2))
