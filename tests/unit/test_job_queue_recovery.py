"""JobQueue recovery after a masterd restart, and secret opcode parameters."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from corral import constants as C
from corral.constants import REDACTED
from corral.jobs import records
from corral.jobs.model import Job, QueuedOpCode
from corral.opcodes.base import OpCode
from corral.opcodes.test import OpTestJqueue
from corral.state.sqlite.jobs import SqliteJobStore
from tests.unit.jobqueue_helpers import QueueHarness, gated, jqueue, settle

SECRET = "s3cr3t-Tq9vXw-7781"


class OpTestQueueSecret(OpCode):
    """An opcode with a secret parameter, as OS installs have."""

    OP_ID = "OP_TEST_QUEUE_SECRET"
    SECRET_FIELDS: ClassVar[tuple[str, ...]] = ("osparams_secret",)

    osparams_secret: dict[str, Any] = Field(default_factory=dict)
    osparams: dict[str, Any] = Field(default_factory=dict)


def secret_op(**secrets: str) -> dict[str, Any]:
    return {"OP_ID": OpTestQueueSecret.OP_ID, "osparams_secret": secrets, "osparams": {"a": "b"}}


async def crash(h: QueueHarness) -> None:
    """Stop the queue without letting gated jobs finish (they stay unfinished on disk)."""
    await h.queue.shutdown(0)
    await h.store.close()
    h.closed = True


def stored_statuses(db_path: Path) -> dict[int, str]:
    with sqlite3.connect(db_path) as db:
        return dict(db.execute("SELECT id, status FROM jobs"))


def db_bytes(db_path: Path) -> bytes:
    data = b""
    for suffix in ("", "-wal", "-shm"):
        path = db_path.with_name(db_path.name + suffix)
        if path.exists():
            data += path.read_bytes()
    return data


async def test_an_opcode_runs_only_once_the_store_holds_it_running(tmp_path: Path) -> None:
    """A master taking over never runs again an opcode that had started."""
    h = QueueHarness(tmp_path)
    held, release = asyncio.Event(), asyncio.Event()
    write_batch = h.store.write_batch

    async def held_write(rows: Sequence[dict[str, Any]], logs: Any, fence: int) -> None:
        if any(row["status"] == "running" for row in rows):
            held.set()
            await release.wait()
        await write_batch(rows, logs, fence)

    h.store.write_batch = held_write  # type: ignore[method-assign]
    try:
        job = await h.queue.submit([gated("a", running=True)])
        await held.wait()
        await settle()
        assert h.running == [] and stored_statuses(h.db_path)[job] in ("queued", "waiting")
        release.set()
        await h.wait_status(job, {"running"})
        async with asyncio.timeout(3):  # past notify_start: a poll with a deadline
            while not h.running:
                await asyncio.sleep(0.002)
        assert stored_statuses(h.db_path) == {job: "running"}
    finally:
        release.set()
        await h.close()


async def test_recover_fails_running_jobs_and_requeues_the_others(tmp_path: Path) -> None:
    h1 = QueueHarness(tmp_path, max_running=3)
    running = await h1.queue.submit([gated("a", running=True), jqueue()])
    waiting = await h1.queue.submit([gated("b")])
    half_done = await h1.queue.submit(
        [jqueue(log_messages=["one"]), gated("d", log_messages=["two"])]
    )
    queued = await h1.queue.submit([jqueue()])
    await h1.wait_status(running, {"running"})
    await h1.wait_status(waiting, {"waiting"})
    await h1.wait_status(half_done, {"waiting"})
    await crash(h1)
    assert stored_statuses(h1.db_path) == {
        running: "running",
        waiting: "waiting",
        half_done: "waiting",
        queued: "queued",
    }

    h2 = QueueHarness(tmp_path, max_running=3)
    try:
        await h2.queue.recover()
        status, opstatus, opresult, end_ts = await h2.row(
            running, "status", "opstatus", "opresult", "end_ts"
        )
        assert status == "error"
        assert opstatus == ["error", "error"]
        assert opresult == [
            ["OpExecError", ["Unclean master daemon shutdown"]],
            ["OpExecError", ["Preceding opcode failed"]],
        ]
        assert end_ts is not None
        assert await h2.row(waiting, "status", "opstatus") == ["queued", ["queued"]]
        assert await h2.row(half_done, "status", "opstatus") == ["queued", ["success", "queued"]]
        assert await h2.row(queued, "status") == ["queued"]
        assert h2.queue.unfinished_count == 3

        # The log of the finished opcode is still there, in memory as on disk.
        info, entries = await h2.queue.queries.wait_for_change(half_done, ["oplog"], None, 0, 1)
        assert [(e[0], e[3]) for e in entries] == [(1, "TESTMSG=one")]
        assert info == await h2.row(half_done, "oplog")

        h2.release("b")
        h2.release("d")
        h2.queue.start()
        for job_id in (waiting, half_done, queued):
            assert await h2.wait_status(job_id) == "success"
        assert sorted(h2.started) == sorted([waiting, half_done, queued])
        assert running not in h2.started
        # Only the unfinished opcode of the half-done job ran again, and its
        # log continues the old numbering.
        assert [type(op) for job_id, op in h2.seen if job_id == half_done] == [OpTestJqueue]
        oplog = (await h2.row(half_done, "oplog"))[0]
        assert [[(e[0], e[3]) for e in op_log] for op_log in oplog] == [
            [(1, "TESTMSG=one")],
            [(2, "TESTMSG=two")],
        ]
        # New jobs continue the id sequence.
        assert await h2.queue.submit([jqueue()]) == queued + 1
    finally:
        await h2.close()


async def test_recover_from_rows_left_by_a_killed_master(tmp_path: Path) -> None:
    store = SqliteJobStore(tmp_path / "queue.db")
    now = time.time()

    def job(job_id: int, *statuses: str) -> Job:
        ops = [QueuedOpCode(OpTestJqueue(), status=s) for s in statuses]
        return Job(job_id, ops, received_timestamp=now, start_timestamp=now)

    rows = [
        records.job_row(job(1, "success", "running", "queued")),
        records.job_row(job(2, "canceling", "canceling")),
        records.job_row(job(3, "queued")),
        records.job_row(job(4, "success", "success")),
    ]
    await store.insert_new(4, lambda ids: rows, 0)
    await store.close()

    h = QueueHarness(tmp_path)
    try:
        await h.queue.recover()
        assert await h.row(1, "status", "opstatus", "opresult") == [
            "error",
            ["success", "error", "error"],
            [
                None,
                ["OpExecError", ["Unclean master daemon shutdown"]],
                ["OpExecError", ["Preceding opcode failed"]],
            ],
        ]
        assert (await h.row(2, "status", "opstatus"))[0] == "canceled"
        assert await h.row(4, "status") == ["success"]
        assert h.queue.unfinished_count == 1
        h.queue.start()
        assert await h.wait_status(3) == "success"
        assert h.started == [3]
        assert await h.queue.submit([jqueue()]) == 5
    finally:
        await h.close()


async def test_secret_parameters_never_reach_the_store(harness: QueueHarness) -> None:
    harness.max_running = 1
    blocker = await harness.queue.submit([gated("block", running=True)])
    job_id = await harness.queue.submit([secret_op(password=SECRET)])
    await settle()
    # Queued, it is only in memory and (redacted) on disk.
    stored = db_bytes(harness.db_path)
    assert SECRET.encode() not in stored
    assert b"osparams_secret" in stored and REDACTED.encode() in stored
    harness.release("block")
    assert await harness.wait_status(job_id) == "success"
    await harness.wait_status(blocker)

    # The executor got the real value...
    [(seen_id, op)] = [(j, o) for j, o in harness.seen if isinstance(o, OpTestQueueSecret)]
    assert seen_id == job_id
    assert op.osparams_secret == {"password": SECRET}
    # ... while neither the files nor a query ever show it.
    stored = db_bytes(harness.db_path)
    assert SECRET.encode() not in stored
    assert b"password" in stored
    ops = (await harness.row(job_id, "ops"))[0]
    assert ops[0]["osparams_secret"] == {"password": REDACTED}
    assert ops[0]["osparams"] == {"a": "b"}


async def test_queued_job_with_secrets_fails_after_a_restart(tmp_path: Path) -> None:
    h1 = QueueHarness(tmp_path, max_running=1)
    blocker = await h1.queue.submit([gated("block", running=True)])
    with_secret = await h1.queue.submit([secret_op(password=SECRET)])
    without_secret = await h1.queue.submit([secret_op()])
    plain = await h1.queue.submit([jqueue()])
    await h1.wait_status(blocker, {"running"})
    await crash(h1)
    assert SECRET.encode() not in db_bytes(h1.db_path)

    h2 = QueueHarness(tmp_path, max_running=1)
    try:
        await h2.queue.recover()
        assert await h2.row(with_secret, "status", "opresult") == [
            "error",
            [["OpExecError", [records.SECRETS_LOST]]],
        ]
        assert "secret parameters" in records.SECRETS_LOST
        h2.queue.start()
        assert await h2.wait_status(without_secret) == "success"
        assert await h2.wait_status(plain) == "success"
        assert await h2.status(blocker) == "error"
        assert with_secret not in h2.started
        assert sorted(h2.started) == [without_secret, plain]
    finally:
        await h2.close()


async def test_recover_keeps_priorities(tmp_path: Path) -> None:
    h1 = QueueHarness(tmp_path, max_running=1)
    await h1.queue.submit([gated("block", running=True)])
    low = await h1.queue.submit([jqueue(priority=C.OP_PRIO_LOW)])
    high = await h1.queue.submit([jqueue(priority=C.OP_PRIO_HIGH)])
    normal = await h1.queue.submit([jqueue()])
    h1.queue.change_priority(normal, C.OP_PRIO_HIGHEST)
    await settle()
    await crash(h1)

    h2 = QueueHarness(tmp_path, max_running=1)
    try:
        await h2.queue.recover()
        h2.queue.start()
        for job_id in (low, high, normal):
            assert await h2.wait_status(job_id) == "success"
        assert h2.started == [normal, high, low]
    finally:
        await h2.close()
