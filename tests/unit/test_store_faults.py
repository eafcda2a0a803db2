"""Storage faults of the job queue and the configuration: real SQLite files on
a tiny tmpfs, filled to the last byte or remounted read-only."""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import errors
from corral.state.ports import ConfigChange
from corral.state.sqlite.config import SqliteConfigStore
from corral.state.sqlite.jobs import SqliteJobStore
from tests.helpers.tmpfs import fill, remount, tmpfs
from tests.helpers.waiting import wait_until_async
from tests.unit.jobqueue_helpers import QueueHarness, gated

NO_SPACE = "No space left on device"


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "disk", "2m") as path:
        yield path


def _row(job_id: int, status: str = "queued") -> dict[str, Any]:
    return {
        "id": job_id,
        "status": status,
        "priority": 0,
        "summary": ["TEST_DELAY(0.0)"],
        "received_ts": 1.0,
        "start_ts": None,
        "end_ts": None,
        "ops": [{"status": status}],
        "log_serial": 0,
    }


def _rows(ids: list[int]) -> list[dict[str, Any]]:
    return [_row(i) for i in ids]


async def test_job_store_full_disk_names_cause_and_path(disk: Path) -> None:
    store = SqliteJobStore(disk / "queue.db")
    try:
        await store.insert_new(2, _rows, 0)
        filler = fill(disk)
        with pytest.raises(errors.JobQueueError) as info:
            await store.insert_new(50, _rows, 0)
        assert str(info.value) == (
            f"Cannot write the job queue {disk / 'queue.db'}: {NO_SPACE}; free space and retry"
        )
        with pytest.raises(errors.JobQueueError, match=NO_SPACE):
            big = [(1, 0, 1, 1.0, "message", "x" * 9000)]
            await store.write_batch([_row(1, "success")] * 200, big, 0)
        # Nothing of the failed writes is there, and the store still reads.
        assert [(r["id"], r["status"]) for r in await store.fetch(None, ["status"])] == [
            (1, "queued"),
            (2, "queued"),
        ]
        filler.unlink()
        assert [r["id"] for r in await store.insert_new(1, _rows, 0)] == [3]
        await store.write_batch([_row(1, "success")], [], 0)
        assert await store.fetch([1], ["status"]) == [{"id": 1, "status": "success", "archived": 0}]
    finally:
        await store.close()


async def test_job_store_read_only_file_system(disk: Path, tmp_path: Path) -> None:
    await SqliteJobStore(disk / "queue.db").close()
    # A read-only view of the same file system (a mount with open files cannot
    # be remounted read-only).
    view = tmp_path / "view"
    view.mkdir()
    subprocess.run(["mount", "--bind", str(disk), str(view)], check=True)
    try:
        remount(view, "bind,ro")
        with pytest.raises(errors.JobQueueError) as info:
            SqliteJobStore(view / "queue.db")
        assert str(info.value) == (
            f"Cannot write the job queue {view / 'queue.db'}: Read-only file system;"
            " make the file system writable and retry"
        )
    finally:
        subprocess.run(["umount", str(view)], check=True)


def _change(name: str, value: int) -> ConfigChange:
    row = {"uuid": f"uuid-{name}", "name": name, "serial_no": 1, "ctime": 1.0, "mtime": 1.0}
    return ConfigChange(upserts={"nodes": [{**row, "pad": "x" * value}]})


async def test_config_store_full_disk_changes_nothing(disk: Path) -> None:
    path = disk / "config.db"
    SqliteConfigStore.create(path, _change("node1", 10))
    store = SqliteConfigStore(path)
    try:
        filler = fill(disk)
        with pytest.raises(errors.OpExecError) as info:
            await store.commit(_change("node2", 400_000), 2, 0)
        assert info.value.args == (
            f"Cannot write the configuration {path}: {NO_SPACE}; free space and retry",
            C.ECODE_ENVIRON,
        )
        snapshot = await store.load()
        assert snapshot.serial == 1 and [n["name"] for n in snapshot.tables["nodes"]] == ["node1"]
        filler.unlink()
        await store.commit(_change("node2", 10), 2, 0)
        assert (await store.load()).serial == 2
    finally:
        await store.close()
    # What a reader sees on disk: the last good change, nothing half-written.
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("SELECT name FROM nodes ORDER BY name").fetchall() == [
            ("node1",),
            ("node2",),
        ]


@pytest.fixture
async def harness(disk: Path) -> AsyncIterator[QueueHarness]:
    h = QueueHarness(disk)
    yield h
    await h.close()


async def test_jobs_whose_state_cannot_be_written_end_in_error(
    harness: QueueHarness, disk: Path
) -> None:
    queue = harness.queue
    ids = [r[1] for r in await queue.submit_many([[gated("g", running=True)] for _ in range(30)])]
    for job_id in ids[:20]:
        await harness.wait_status(job_id, {"running"})
    await queue.flush()
    filler = fill(disk)
    harness.release("g")
    # A job may show its success until the write of it fails (a few ms).
    for job_id in ids:
        await harness.wait_status(job_id, {"error"})
    for job_id in ids:
        status, (result,) = await harness.row(job_id, "status", "opresult")
        assert status == "error", (job_id, status, result)
        assert NO_SPACE in str(result) and str(disk / "queue.db") in str(result)
    with pytest.raises(errors.JobQueueError, match=NO_SPACE):
        await queue.submit([gated("h")])
    # Cancel and archive agree with the job's real state: final, not yet on disk.
    assert await queue.cancel(ids[0]) == [False, f"Job {ids[0]} not found in queue"]
    filler.unlink()
    await queue.flush()
    assert queue.unfinished_count == 0
    with sqlite3.connect(disk / "queue.db") as db:
        stored = dict(db.execute("SELECT id, status FROM jobs"))
    assert all(stored[job_id] == "error" for job_id in ids), stored
    assert await queue.archive(ids[0]) is True
    new = await queue.submit([gated("h", running=True)])
    harness.release("h")
    assert await harness.wait_status(new) == "success"


async def test_write_retried_by_timer_after_space_returns(
    harness: QueueHarness, disk: Path
) -> None:
    queue = harness.queue
    job_id = await queue.submit([gated("g", running=True)])
    await harness.wait_status(job_id, {"running"})
    await queue.flush()
    filler = fill(disk)
    harness.release("g")
    await harness.wait_status(job_id)
    assert queue.unfinished_count == 0 and job_id in queue._jobs
    filler.unlink()
    # No further change comes: only the retry timer writes the job.
    await wait_until_async(lambda: job_id not in queue._jobs, 10, "the retry timer's write")
    with sqlite3.connect(disk / "queue.db") as db:
        assert db.execute("SELECT status FROM jobs WHERE id = ?", (job_id,)).fetchone() == (
            "error",
        )
