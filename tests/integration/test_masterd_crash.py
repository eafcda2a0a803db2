"""masterd killed, stopped and started twice: jobs and config survive."""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral import constants as C
from corral.process.daemons import DaemonStartError, running_pid, start_daemon
from tests.helpers.cluster import TestCluster, new_root, running_cluster
from tests.helpers.jobs import wait_final, wait_status
from tests.helpers.waiting import wait_until

MASTERD = "corral-masterd"
JOBS = 200
UNCLEAN_SHUTDOWN = "Unclean master daemon shutdown"


def start_masterd(cl: TestCluster) -> None:
    start_daemon([sys.executable, "-m", "corral.daemons.masterd"], cl.env, timeout=30)


def wait_gone(pid: int, timeout: float = 15) -> None:
    """Wait until ``pid`` has exited (a zombie counts as gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except FileNotFoundError:
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} still alive after {timeout} s")


def stored_statuses(queue_db: Path) -> dict[int, str]:
    """The job statuses masterd had committed, read from its store (read-only)."""
    db = sqlite3.connect(f"file:{queue_db}?mode=ro", uri=True)
    try:
        return dict(db.execute("SELECT id, status FROM jobs"))
    finally:
        db.close()


def test_kill_9_with_200_jobs_queued_or_running(tmp_path: Path) -> None:
    with running_cluster(tmp_path) as cl:
        client = cl.client()
        assert client.call("QueryClusterInfo")["max_running_jobs"] == 20
        results = client.submit_many_jobs(
            # Not on the master: such delays lock no node, so 20 of them run at once.
            [[{"OP_ID": "OP_TEST_DELAY", "duration": 0.2, "on_master": False}] for _ in range(JOBS)]
        )
        assert all(ok for ok, _ in results)
        ids = [job_id for _, job_id in results]
        # A config change committed right before the kill (high priority, so it
        # runs between the first delays and the rest).
        tag_job = client.submit_job(
            [
                {
                    "OP_ID": "OP_TAGS_SET",
                    "kind": "cluster",
                    "name": "",
                    "tags": ["before-the-kill"],
                    "priority": C.OP_PRIO_HIGH,
                }
            ]
        )
        assert wait_final(client, [tag_job]) == [["success"]]
        serial = client.call("QueryConfigValues", ["config_serial"])[0]
        # Kill while some delays run and others wait for a slot.
        wait_until(
            lambda: "running" in stored_statuses(cl.paths.queue_db).values(),
            what="a running job in the store",
        )
        pid = running_pid(cl.paths.pid_file(MASTERD))
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_gone(pid)
        client.close()

        at_kill = stored_statuses(cl.paths.queue_db)
        counts = Counter(at_kill[job_id] for job_id in ids)
        assert counts["running"] > 0 and counts["queued"] > 0, counts
        # Without masterd the commands say so, and exit 1.
        down = cl.gnt("job", "list")
        assert down.rc == 1
        assert down.stderr.splitlines() == [
            f"Cannot communicate with the master daemon at {cl.paths.master_socket}:"
            " Connection refused.",
            "Is the process running and listening for connections?",
        ]

        start_masterd(cl)
        with cl.client() as client:
            rows = wait_final(client, ids, ("status", "opstatus", "opresult"), timeout=30)
            assert client.call("QueryTags", "cluster", "") == ["before-the-kill"]
            assert client.call("QueryConfigValues", ["config_serial"]) == [serial]
        final = dict(zip(ids, rows, strict=True))
        for job_id, before in at_kill.items():
            if job_id not in final:
                continue
            status, opstatus, opresult = final[job_id]
            if before == "running":
                assert (status, opstatus) == ("error", ["error"]), job_id
                assert opresult == [["OpExecError", [UNCLEAN_SHUTDOWN]]], job_id
            else:  # queued, waiting for its lock, or already done
                assert (status, opresult) == ("success", [None]), (job_id, before)
        assert Counter(row[0] for row in rows) == {
            "error": counts["running"],
            "success": JOBS - counts["running"],
        }
        log = cl.paths.daemon_log(MASTERD).read_text()
        assert "interrupted by a restart" in log
        # The restarted masterd takes new jobs, with new ids.
        after = cl.gnt("debug", "delay", "--submit", "0")
        assert after.rc == 0 and int(after.stderr.split()[-1]) > tag_job


@pytest.fixture
def cl(tmp_path: Path) -> Iterator[TestCluster]:
    with running_cluster(tmp_path) as cluster:
        yield cluster


def test_sigterm_stops_cleanly_and_restart_works(cl: TestCluster) -> None:
    pid = running_pid(cl.paths.pid_file(MASTERD))
    assert pid is not None
    with cl.client() as client:
        job_id = client.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0.5}])
        wait_status(client, job_id, {C.JOB_STATUS_RUNNING})
    os.kill(pid, signal.SIGTERM)
    wait_gone(pid)
    assert not cl.paths.pid_file(MASTERD).exists()
    assert not cl.paths.master_socket.exists()
    log = cl.paths.daemon_log(MASTERD).read_text()
    assert "Stopped by signal" in log and f"{MASTERD} stopped" in log
    down = cl.gnt("job", "list")
    assert down.rc == 1 and "Cannot communicate with the master daemon" in down.stderr

    start_masterd(cl)
    new_pid = running_pid(cl.paths.pid_file(MASTERD))
    assert new_pid is not None and new_pid != pid
    # The running job was given time to finish before masterd stopped.
    with cl.client() as client:
        assert client.query_jobs([job_id], ["status", "opresult"]) == [["success", [None]]]
    listing = cl.gnt("job", "list", "--no-headers")
    assert listing.rc == 0
    assert [line.split()[:2] for line in listing.stdout.splitlines()] == [
        ["1", "success"],
        [str(job_id), "success"],
    ]
    assert cl.gnt("debug", "delay", "0").rc == 0


def test_second_masterd_is_refused(cl: TestCluster) -> None:
    pid = running_pid(cl.paths.pid_file(MASTERD))
    with pytest.raises(DaemonStartError, match=f"{MASTERD} is already running \\(pid {pid}\\)"):
        start_masterd(cl)
    assert running_pid(cl.paths.pid_file(MASTERD)) == pid
    assert cl.gnt("job", "list").rc == 0


def test_masterd_without_cluster_is_refused(tmp_path: Path) -> None:
    empty = new_root(tmp_path)
    with pytest.raises(DaemonStartError, match="No cluster configuration"):
        start_masterd(empty)
    assert running_pid(empty.paths.pid_file(MASTERD)) is None
