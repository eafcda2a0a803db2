"""ganeti-watcher against a real cluster (masterd, noded, the fake hypervisor):
it restarts an instance shut down behind the configuration's back, five times
in a row at most (Ganeti's QA TestInstanceConsecutiveFailures), archives old
jobs, runs the site's watcher hooks, does nothing while paused, and keeps its
state in Ganeti's files."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cluster import Result, TestCluster, running_cluster
from tests.helpers.instances import add, ok, rows
from tests.helpers.osdef import make_os

INST = "watched"


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
        run = watcher(cl, "-d")
        assert run.rc == 0 and "Pause has been set, exiting" in run.stderr
        assert status(cl) == "ERROR_down"
    finally:
        ok(cl.gnt("cluster", "watcher", "continue"))
    assert watcher(cl).rc == 0
    assert status(cl) == "running"


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
    ],
)
def test_bad_input_is_refused(cl: TestCluster, args: list[str], message: str) -> None:
    run = watcher(cl, "-d", *args)
    assert run.rc != 0
    assert message in run.stderr
