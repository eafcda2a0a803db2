"""A full disk under a real masterd: the job queue and the configuration on a
small tmpfs, filled to the last byte while jobs run, then freed."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral import errors
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.jobs import FINAL, delay_gate_path, release_gate, wait_final
from tests.helpers.tmpfs import fill, tmpfs
from tests.helpers.waiting import wait_until

NO_SPACE = "No space left on device"
JOBS = 80


def gated_delay() -> dict[str, Any]:
    """A delay until released; on no node, so it locks none and 80 run at once."""
    return {"OP_ID": "OP_TEST_DELAY", "duration": 600, "interruptible": True, "on_master": False}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[TestCluster]:
    """A cluster whose whole root is on a 64 MB tmpfs."""
    with (
        tmpfs(tmp_path / "root", "64m"),
        running_cluster(tmp_path, "--max-running-jobs", "80") as cl,
    ):
        yield cl


def stored_statuses(cl: TestCluster, ids: list[int]) -> list[str]:
    """What queue.db itself says (another reader, as after a power loss)."""
    with sqlite3.connect(cl.paths.queue_db) as db:
        found = dict(db.execute("SELECT id, status FROM jobs"))
    return [found.get(job_id, "missing") for job_id in ids]


@pytest.mark.slow
def test_full_disk_while_80_jobs_run_then_freed(cluster: TestCluster) -> None:
    cl = cluster
    with cl.client() as client:
        ids = [job_id for _ok, job_id in client.submit_many_jobs([[gated_delay()]] * JOBS)]
        gates = [delay_gate_path(client, job_id) for job_id in ids]
        filler = fill(cl.paths.root)
        for gate in gates:
            release_gate(gate)
        # A job may show its success until the write of it fails (a few ms).
        wait_until(
            lambda: all(row[0] == "error" for row in client.query_jobs(ids, ["status"])),
            30,
            "every job failed",
        )
        rows = client.query_jobs(ids, ["status", "opresult"])
        for status, (result,) in rows:
            assert status == "error", (status, result)
            assert NO_SPACE in str(result) and str(cl.paths.queue_db) in str(result), result
        # A submission while full is refused, saying why.
        with pytest.raises(errors.JobQueueError) as info:
            client.submit_job([gated_delay()])
        assert f"Cannot write the job queue {cl.paths.queue_db}: {NO_SPACE}" in str(info.value)
        # Cancel and archive agree with the jobs' real (final) state.
        assert client.call("CancelJob", ids[0])[0] is False
        filler.unlink()
        wait_until(
            lambda: set(stored_statuses(cl, ids)) == {"error"}, 10, "every job final on disk"
        )
        assert client.call("ArchiveJob", ids[0]) is True
        (new,) = [client.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0}])]
        assert wait_final(client, [new]) == [["success"]]
    assert set(stored_statuses(cl, ids[1:])) <= FINAL


def test_cancel_and_archive_of_a_running_job(cluster: TestCluster) -> None:
    with cluster.client() as client:
        job_id = client.submit_job([gated_delay()])
        gate = delay_gate_path(client, job_id)
        assert client.call("CancelJob", job_id) == [False, "Job no longer waiting, can't cancel"]
        assert client.call("ArchiveJob", job_id) is False
        assert stored_statuses(cluster, [job_id]) == ["running"]
        release_gate(gate)
        assert wait_final(client, [job_id]) == [["success"]]
        assert client.call("ArchiveJob", job_id) is True


def test_full_config_disk_changes_nothing(tmp_path: Path) -> None:
    """The configuration's file system full, the queue's not: a clear error."""
    queue_dir = tmp_path / "root" / "var" / "lib" / "ganeti" / "queue"
    with (
        tmpfs(tmp_path / "root", "64m"),
        tmpfs(queue_dir, "16m"),
        running_cluster(tmp_path) as cl,
    ):
        assert cl.paths.queue_dir == queue_dir
        before = cl.gnt("cluster", "info").stdout
        filler = fill(cl.paths.root)
        result = cl.gnt("cluster", "modify", "--max-running-jobs", "7")
        assert result.rc != 0
        assert f"Cannot write the configuration {cl.paths.config_db}: {NO_SPACE}" in result.stderr
        filler.unlink()
        assert cl.gnt("cluster", "info").stdout == before
        assert cl.gnt("cluster", "modify", "--max-running-jobs", "7").rc == 0
        assert "7" in cl.gnt("cluster", "info").stdout
