"""ganeti-watcher against a real cluster (masterd, noded, the fake hypervisor):
it restarts an instance shut down behind the configuration's back, five times
in a row at most (Ganeti's QA TestInstanceConsecutiveFailures), restarts
daemons killed with SIGKILL with their own command lines, cancels a remote
import that stalled past its time-out, archives old jobs, runs the site's
watcher hooks, does nothing while paused (also while masterd is down), keeps
its state in Ganeti's files and logs each action in watcher.log."""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral.crypto import rie
from corral.process.daemons import running_pid
from tests.helpers.certs import self_signed_pem
from tests.helpers.cluster import Result, TestCluster, running_cluster
from tests.helpers.instances import add, ok, rows
from tests.helpers.osdef import make_os
from tests.helpers.waiting import wait_until

INST = "watched"
NODED, MASTERD, RAPI = "corral-noded", "corral-masterd", "corral-rapi"


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("watcher")) as cluster:
        make_os(cluster.paths, "plain", variants=None)
        ok(add(cluster, INST, "-t", "diskless", "-o", "plain"))
        yield cluster


def watcher(cl: TestCluster, *args: str) -> Result:
    proc = subprocess.run(
        [sys.executable, "-m", "corral.tools.watcher", *args],
        env=cl.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def status(cl: TestCluster) -> str:
    return rows(cl, ["status"], INST)[0][0]


def shut_down_behind_its_back(cl: TestCluster) -> None:
    ok(cl.gnt("instance", "shutdown", "--no-remember", INST))
    assert status(cl) == "ERROR_down"


def state_files(cl: TestCluster) -> list[Path]:
    return sorted(cl.paths.data_dir.glob("watcher.*-*-*-*.data"))


def test_restarts_an_instance_five_times_in_a_row_then_gives_up(cl: TestCluster) -> None:
    for path in state_files(cl):
        path.unlink()
    for attempt in range(1, 6):
        shut_down_behind_its_back(cl)
        run = watcher(cl, "-d", "--ignore-pause", "--wait-children")
        assert run.rc == 0, run.stderr
        assert f"Restarting instance '{INST}' (attempt #{attempt})" in run.stderr
        assert status(cl) == "running"
    shut_down_behind_its_back(cl)
    run = watcher(cl, "-d", "--ignore-pause")
    assert run.rc == 0, run.stderr
    assert f"Could not restart instance '{INST}' after 5 attempts, giving up" in run.stderr
    assert status(cl) == "ERROR_down"
    [path] = state_files(cl)
    assert json.loads(path.read_text())["instance"][INST]["restart_count"] == 6
    # Ganeti's QA resets the watcher by removing its state files.
    path.unlink()
    assert watcher(cl, "--ignore-pause").rc == 0
    assert status(cl) == "running"
    # Running again: its record is dropped.
    run = watcher(cl, "-d", "--ignore-pause")
    assert f"Restart of instance '{INST}' succeeded" in run.stderr
    [path] = state_files(cl)
    assert json.loads(path.read_text())["instance"] == {}
    status_file = (cl.paths.run_dir / "instance-status").read_text()
    assert f"{INST} running" in status_file.splitlines()


def test_a_paused_watcher_does_nothing(cl: TestCluster) -> None:
    ok(cl.gnt("cluster", "watcher", "pause", "1h"))
    try:
        shut_down_behind_its_back(cl)
        noded = kill(cl, NODED)
        run = watcher(cl, "-d")
        assert run.rc == 0 and "Pause has been set, exiting" in run.stderr
        assert daemon_pid(cl, NODED) is None
        # The pause holds while masterd is down too: it stays down.
        kill(cl, MASTERD)
        run = watcher(cl, "-d")
        assert run.rc == 0 and "Pause has been set, exiting" in run.stderr
        assert daemon_pid(cl, MASTERD) is None and daemon_pid(cl, NODED) is None
        # Told to ignore the pause, it starts both again.
        run = watcher(cl, "-d", "--ignore-pause", "--no-verify-disks")
        assert run.rc == 0, run.stderr
        assert daemon_cmdline(cl, NODED) == noded
        assert daemon_pid(cl, MASTERD) is not None
    finally:
        ok(cl.gnt("cluster", "watcher", "continue"))
    assert watcher(cl).rc == 0
    assert status(cl) == "running"


# Daemons
def daemon_pid(cl: TestCluster, name: str) -> int | None:
    """The pid of the daemon ``name`` if its process runs that daemon."""
    pid = running_pid(cl.paths.pid_file(name))
    module = f"corral.daemons.{name.removeprefix('corral-')}"
    return pid if pid is not None and module in cmdline(pid) else None


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
    except OSError:
        return []


def daemon_cmdline(cl: TestCluster, name: str) -> list[str]:
    pid = daemon_pid(cl, name)
    assert pid is not None, f"{name} does not run"
    return cmdline(pid)


def kill(cl: TestCluster, name: str) -> list[str]:
    """SIGKILL the daemon ``name``, wait until it is gone; its command line."""
    pid = daemon_pid(cl, name)
    assert pid is not None, f"{name} does not run"
    argv = cmdline(pid)
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: daemon_pid(cl, name) is None, timeout=30, what=f"{name} to die")
    return argv


def log_lines(cl: TestCluster) -> list[str]:
    return (cl.paths.log_dir / "watcher.log").read_text().splitlines()


def test_restarts_killed_daemons_with_their_command_lines(cl: TestCluster) -> None:
    before = {name: kill(cl, name) for name in (NODED, MASTERD, RAPI)}
    logged = len(log_lines(cl))
    run = watcher(cl, "--no-verify-disks")
    assert run.rc == 0, run.stderr
    for name, argv in before.items():
        assert daemon_cmdline(cl, name) == argv
    new = log_lines(cl)[logged:]
    for name in (NODED, MASTERD, RAPI):
        pid = daemon_pid(cl, name)
        assert sum(f"Restarted daemon {name} (pid {pid}): " in line for line in new) == 1, new
    # They answer: masterd a query, noded the instance's live state.
    assert status(cl) == "running"
    # Alive daemons are left alone: no second copy, nothing logged.
    pids = {name: daemon_pid(cl, name) for name in before}
    logged = len(log_lines(cl))
    assert watcher(cl, "--no-verify-disks").rc == 0
    assert {name: daemon_pid(cl, name) for name in before} == pids
    assert not [line for line in log_lines(cl)[logged:] if "Restarted daemon" in line]


def test_a_pid_taken_by_another_program_is_a_dead_daemon(cl: TestCluster) -> None:
    """A pid file naming a live process that is not noded (a reused pid)."""
    kill(cl, NODED)
    other = subprocess.Popen(["sleep", "600"])
    try:
        cl.paths.pid_file(NODED).write_text(f"{other.pid}\n")
        run = watcher(cl, "--no-verify-disks")
        assert run.rc == 0, run.stderr
        assert daemon_pid(cl, NODED) not in (None, other.pid)
        assert other.poll() is None  # left alone
    finally:
        other.kill()
        other.wait()


# Pending remote imports
def signed_cert(cds: bytes) -> str:
    """A source's self-signed certificate signed with the domain secret ``cds``."""
    pem = self_signed_pem(
        "source.example.com", -datetime.timedelta(minutes=5), datetime.timedelta(days=1)
    )
    return rie.sign_x509_cert(pem, cds, rie.new_salt())


def job_field(cl: TestCluster, job_id: int, field: str) -> Any:
    with cl.client() as client:
        return client.query_jobs([job_id], [field])[0][0]


def last_activity(cl: TestCluster, job_id: int) -> float:
    stamps = [job_field(cl, job_id, "start_ts")]
    stamps += [entry[1] for entries in job_field(cl, job_id, "oplog") for entry in entries]
    return max(float(sec) + float(usec) / 1e6 for sec, usec in stamps)


def test_removes_a_stale_pending_remote_import(cl: TestCluster) -> None:
    cds = rie.read_domain_secret(cl.paths)
    op = {
        "OP_ID": "OP_INSTANCE_CREATE",
        "instance_name": "moving-in",
        "mode": "remote-import",
        "disk_template": "file",
        "disks": [{"size": 4}],
        "nics": [],
        "os_type": "plain",
        "pnode": cl.node_name,
        "name_check": False,
        "ip_check": False,
        "start": False,
        "source_handshake": rie.compute_handshake(cds),
        "source_x509_ca": signed_cert(cds),
        "source_instance_name": "far-away.example.com",
        "source_shutdown_timeout": 0,
    }
    with cl.client() as client:
        job_id = client.submit_job([op])

    def logged_entry() -> bool:
        entries = job_field(cl, job_id, "oplog")[0]
        return any(entry[2] == "remote-import" for entry in entries)

    wait_until(logged_entry, timeout=60, what="the import's remote-import entry")
    # Within the (default) time-out, it is left alone.
    assert watcher(cl, "--no-verify-disks").rc == 0
    assert job_field(cl, job_id, "status") == "running"
    # Idle for longer than a 1 s time-out: cancelled, and nothing stays.
    wait_until(lambda: time.time() - last_activity(cl, job_id) > 1.5, timeout=30, what="idle")
    logged = len(log_lines(cl))
    run = watcher(cl, "--no-verify-disks", "--remote-import-timeout", "1")
    assert run.rc == 0, run.stderr
    assert job_field(cl, job_id, "status") == "canceled"
    assert "moving-in" not in ok(cl.gnt("instance", "list", "--no-headers", "-o", "name"))
    assert not list(cl.paths.file_storage_dir.glob("moving-in*"))
    [line] = [line for line in log_lines(cl)[logged:] if "Removed pending" in line]
    assert f"Removed pending remote import of instance moving-in: job {job_id} idle for" in line


def test_runs_the_watcher_hooks_and_archives_old_jobs(cl: TestCluster, tmp_path: Path) -> None:
    hooks = cl.paths.hooks_dir / "watcher"
    hooks.mkdir(parents=True, exist_ok=True)
    marker = tmp_path / "hook-ran"
    (hooks / "10-mark").write_text(f"#!/bin/sh\necho ran > {marker}\n")
    (hooks / "10-mark").chmod(0o755)
    (hooks / "skipped.sh").write_text(f"#!/bin/sh\necho no > {marker}.bad\n")
    (hooks / "skipped.sh").chmod(0o755)
    before = ok(cl.gnt("job", "list", "--no-headers", "-o", "id")).split()
    assert before
    run = watcher(cl, "-d", "--job-age", "0")
    assert run.rc == 0, run.stderr
    assert marker.read_text() == "ran\n" and not Path(f"{marker}.bad").exists()
    assert "Watcher hook skipped.sh: skipped" in run.stderr
    left = ok(cl.gnt("job", "list", "--no-headers", "-o", "id")).split()
    assert not set(before) & set(left)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["extra"], "No arguments expected"),
        (["--job-age", "5x"], "Invalid time specification '5x'"),
        (["--node-group", "not-a-uuid"], "must be given a UUID, got 'not-a-uuid'"),
        (["--remote-import-timeout", "0"], "--remote-import-timeout must be a positive time"),
        (["--remote-import-timeout", "soon"], "Invalid time specification 'soon'"),
    ],
)
def test_bad_input_is_refused(cl: TestCluster, args: list[str], message: str) -> None:
    run = watcher(cl, "-d", *args)
    assert run.rc != 0
    assert message in run.stderr
