"""Corral's move-instance between two Corral clusters on one machine (each
its own root, address and corral-rapi): the destination gets the instance
with the same disk data, the source loses it (or keeps it when asked); a
mismatched domain secret, an unknown instance, a destination that refuses and
an export that fails midway each end with a clear error, nothing moved, and
no job left running on either side.

Instance names must resolve (the destination checks them, as Ganeti's does):
the tests use ``localhost``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cluster import TestCluster
from tests.helpers.osdef import make_os
from tests.helpers.two_clusters import (
    DUMPER_SCRIPTS,
    OS_NAME,
    add_instance,
    corral_move,
    disk_file,
    gated_export,
    move_args,
    two_clusters,
)
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.slow

NAME = "localhost"
MIB = 1024 * 1024


def instances(cl: TestCluster) -> list[str]:
    result = cl.gnt("instance", "list", "--no-headers", "-o", "name")
    assert result.rc == 0, result.stderr
    return result.stdout.split()


def unfinished_jobs(cl: TestCluster) -> list[str]:
    result = cl.gnt("job", "list", "--no-headers", "-o", "id,status,summary")
    assert result.rc == 0, result.stderr
    return [line for line in result.stdout.splitlines() if line.split()[1] not in
            ("success", "error", "canceled")]  # fmt: skip


def test_move_and_keep(tmp_path: Path) -> None:
    with two_clusters(tmp_path) as (src, dest):
        data = os.urandom(3 * MIB + 12345)
        add_instance(src, NAME, data, "-B", "vcpus=2", "--tags", "moved,web")
        assert src.gnt("instance", "startup", NAME).rc == 0
        result = corral_move(src, dest, tmp_path, NAME)
        assert result.rc == 0, result.stderr
        assert f"{NAME}: Success" in result.stderr
        assert instances(src) == [] and instances(dest) == [NAME]
        assert disk_file(dest, NAME).read_bytes()[: len(data)] == data
        # Running before, running after (on the fake hypervisor).
        info = dest.gnt("instance", "list", "--no-headers", "-o", "os,be/vcpus,status", NAME)
        assert info.stdout.split() == [f"{OS_NAME}+default", "2", "running"]

        # And back again, keeping the (running) instance on the now source
        # cluster: it is shut down for the export and started again.
        result = corral_move(dest, src, tmp_path, NAME, extra=("--keep-source-instance",))
        assert result.rc == 0, result.stderr
        assert instances(src) == [NAME] and instances(dest) == [NAME]
        for cl in (src, dest):
            status = cl.gnt("instance", "list", "--no-headers", "-o", "status", NAME)
            assert status.stdout.split() == ["running"]
        assert disk_file(src, NAME).read_bytes()[: len(data)] == data
        assert disk_file(dest, NAME).read_bytes()[: len(data)] == data
        assert unfinished_jobs(src) == [] and unfinished_jobs(dest) == []


def test_different_domain_secrets_refused(tmp_path: Path) -> None:
    with two_clusters(tmp_path, same_secret=False) as (src, dest):
        data = os.urandom(MIB)
        disk = add_instance(src, NAME, data)
        result = corral_move(src, dest, tmp_path, NAME)
        assert result.rc == 1
        assert f"{NAME}: Failed (Source error: Aborted, destination error:" in result.stderr
        assert "handshake" in result.stderr.lower(), result.stderr
        assert instances(src) == [NAME] and instances(dest) == []
        assert disk.read_bytes()[: len(data)] == data
        assert unfinished_jobs(src) == [] and unfinished_jobs(dest) == []


def test_refusals_move_nothing(tmp_path: Path) -> None:
    with two_clusters(tmp_path) as (src, dest):
        result = corral_move(src, dest, tmp_path, NAME)
        assert result.rc == 1
        assert f"Source error: Instance {NAME} not found (404" in result.stderr
        assert "destination error: Aborted" in result.stderr

        add_instance(src, NAME, b"source data")
        add_instance(dest, NAME, b"an instance of the same name")
        result = corral_move(src, dest, tmp_path, NAME)
        assert result.rc == 1
        assert "Source error: Aborted, destination error:" in result.stderr
        assert "already" in result.stderr, result.stderr
        assert instances(src) == [NAME] and instances(dest) == [NAME]
        assert disk_file(dest, NAME).read_bytes().startswith(b"an instance of the same name")
        assert unfinished_jobs(src) == [] and unfinished_jobs(dest) == []


def test_failed_export_cancels_the_import(tmp_path: Path) -> None:
    with two_clusters(tmp_path) as (src, dest):
        data = os.urandom(2 * MIB)
        disk = add_instance(src, NAME, data)
        # The export script now fails after some data: the source job fails while
        # the destination's import waits for the rest.
        failing = {**DUMPER_SCRIPTS,
                   "export": '#!/bin/sh\nhead -c 65536 "$EXPORT_DEVICE"\nexit 3\n'}  # fmt: skip
        make_os(src.paths, OS_NAME, scripts=failing)
        result = corral_move(src, dest, tmp_path, NAME)
        assert result.rc == 1
        assert "Source error: " in result.stderr
        # The import is cancelled, unless the broken stream already failed it
        # (which of the two comes first depends on the machine's load).
        assert "Cancelling job" in result.stderr or "Could not import disk/0" in result.stderr
        assert instances(src) == [NAME] and instances(dest) == []
        assert disk.read_bytes()[: len(data)] == data
        assert unfinished_jobs(src) == [] and unfinished_jobs(dest) == []
        storage = dest.paths.root / "srv" / "ganeti" / "file-storage" / NAME
        assert not storage.exists() or not any(storage.iterdir())


def running_job(cl: TestCluster, summary: str) -> str | None:
    result = cl.gnt("job", "list", "--no-headers", "-o", "id,status,summary")
    for line in result.stdout.splitlines():
        job_id, status, text = line.split(None, 2)
        if status == "running" and text.startswith(summary):
            return job_id
    return None


@pytest.mark.parametrize("side", ["src", "dest"])
def test_gnt_job_cancel_on_either_side(tmp_path: Path, side: str) -> None:
    """``gnt-job cancel --kill`` of one side's job: move-instance cancels the
    other side's, nothing is moved and the source instance stays."""
    with two_clusters(tmp_path) as (src, dest):
        data = os.urandom(MIB)
        disk = add_instance(src, NAME, data)
        gate = tmp_path / "gate"
        make_os(src.paths, OS_NAME, scripts={**DUMPER_SCRIPTS, "export": gated_export(gate)})
        argv = [sys.executable, "-m", "corral.tools.move_instance", "-v",
                *move_args(src, dest, tmp_path), src.node_ip, dest.node_ip, NAME]  # fmt: skip
        mover = subprocess.Popen(argv, env=src.env, stderr=subprocess.PIPE, text=True)
        try:
            jobs: dict[str, str | None] = {}

            def both_running() -> bool:
                jobs["src"] = running_job(src, "BACKUP_EXPORT")
                jobs["dest"] = running_job(dest, "INSTANCE_CREATE")
                return None not in jobs.values()

            wait_until(both_running, timeout=60, what="the export and the import running")
            target = src if side == "src" else dest
            result = target.gnt("job", "cancel", "--kill", "--yes-do-it", str(jobs[side]))
            assert result.rc == 0, result.stderr
            _, stderr = mover.communicate(timeout=120)
        finally:
            gate.touch()
            if mover.poll() is None:
                mover.kill()
                mover.wait()
        assert mover.returncode == 1, stderr
        assert f"{NAME}: Failed (Source error: " in stderr
        # The killed job's side reports the cancel, unless the other side, its
        # transfer cut, failed first: then the killed side just stops.
        assert "was canceled" in stderr or "Source error: Aborted" in stderr, stderr
        assert instances(src) == [NAME] and instances(dest) == []
        assert disk.read_bytes()[: len(data)] == data
        wait_until(lambda: unfinished_jobs(src) == unfinished_jobs(dest) == [], timeout=60)


def test_several_instances_in_parallel(tmp_path: Path) -> None:
    """Two moves at once (the allocator places them on the destination): the
    one whose instance exists succeeds, the other fails on its own."""
    with two_clusters(tmp_path) as (src, dest):
        data = os.urandom(MIB)
        add_instance(src, NAME, data)
        argv = [a for a in move_args(src, dest, tmp_path) if not a.startswith("--dest-primary")]
        missing = "missing.example.com"
        proc = subprocess.run(
            [sys.executable, "-m", "corral.tools.move_instance", "-v", "--parallel=2",
             "-I", "hail", *argv, src.node_ip, dest.node_ip, NAME, missing],
            env=src.env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert proc.returncode == 1, proc.stderr
        assert f"INFO {NAME}: Success" in proc.stderr
        assert f"ERROR {missing}: Failed (Source error: Instance {missing} not found" in proc.stderr
        assert instances(src) == [] and instances(dest) == [NAME]
        assert disk_file(dest, NAME).read_bytes()[: len(data)] == data
