"""gnt-instance move between real nodes: file disks streamed from one noded
to another on the import/export engine, checked byte for byte; refusals that
change nothing; a target killed mid-copy and a job cancelled mid-copy leave the source as it
was and the target clean."""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.paths import Paths
from corral.process.daemons import start_daemon
from corral.rpc import calls_impexp
from tests.helpers.cluster import TestCluster
from tests.helpers.instances import add, failed, ok, rows
from tests.helpers.jobs import cluster_state, wait_final
from tests.helpers.multinode import cluster_with_nodes
from tests.helpers.noded import Noded, daemon_env, noded_cmd
from tests.helpers.tmpfs import fill, tmpfs
from tests.helpers.waiting import wait_until

NODE1, NODE2, NODE3 = "node1.example.com", "node2.example.com", "node3.example.com"
MIB = 1024 * 1024
PROGRESS = re.compile(r"disk/0 sent \d+M, \d+\.\d MiB/s, \d+%, ETA (\d+[dhm] )*\d+s$")


class Bed:
    def __init__(self, cl: TestCluster, extra: list[Noded]) -> None:
        self.cl = cl
        self.nodes = {NODE1: Noded(cl.paths, cl.node_ip, cl.port, NODE1, master=cl.paths)}
        self.nodes.update({n.name: n for n in extra})

    def paths(self, node: str) -> Paths:
        return self.nodes[node].paths


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    with cluster_with_nodes(tmp_path_factory.mktemp("move"), (NODE2, NODE3)) as (cl, extra):
        yield Bed(cl, extra)


def new_file_instance(bed: Bed, name: str, *sizes: str, start: bool = True) -> None:
    disks = [f"--disk={i}:size={size}" for i, size in enumerate(sizes)]
    extra = [] if start else ["--no-start"]
    ok(add(bed.cl, name, "-t", "file", *disks, "-o", "plain", "--no-install", "-n", NODE1, *extra))


def disk_files(bed: Bed, node: str, name: str) -> list[Path]:
    """The instance's disk files on ``node``, disk 0 first."""
    directory = bed.paths(node).file_storage_dir / name
    return sorted(directory.glob("*.disk*"), key=lambda p: p.name.rsplit("disk", 1)[1])


def fill_disks(bed: Bed, name: str) -> list[bytes]:
    """Write non-zero content (with a hole) over each disk on node1; the contents."""
    contents = []
    for path in disk_files(bed, NODE1, name):
        size = path.stat().st_size
        data = os.urandom(size // 2) + bytes(size // 4) + os.urandom(size - size // 2 - size // 4)
        path.write_bytes(data)
        contents.append(data)
    return contents


def hv_state(bed: Bed, node: str, name: str) -> str | None:
    path = bed.paths(node).run_dir / "fake-hypervisor" / name
    return json.loads(path.read_text())["state"] if path.exists() else None


def where(bed: Bed, name: str) -> dict[str, str]:
    out = {}
    for node in bed.nodes:
        state = hv_state(bed, node, name)
        if state is not None:
            out[node] = state
    return out


def pnode(bed: Bed, name: str) -> str:
    return rows(bed.cl, ["pnode"], name)[0][0]


def job_log(bed: Bed, job_id: int) -> list[str]:
    with bed.cl.client() as client:
        (row,) = client.query_jobs([job_id], ["oplog"])
    return [str(entry[3]) for op in row[0] for entry in op]


def submit_move(bed: Bed, name: str, target: str) -> int:
    args = ("move", "-f", "--submit", "--print-jobid", "-n", target, name)
    return int(ok(bed.cl.gnt("instance", *args)).split()[0])


def wait_paused(bed: Bed, job_id: int) -> None:
    """Until the job logged the first chunk sent (the gate holds the rest)."""
    wait_until(
        lambda: any(line.startswith("disk/0 sent") for line in job_log(bed, job_id)),
        timeout=60,
        what="the first chunk sent",
    )


def test_move_stopped_and_running_instances(bed: Bed) -> None:
    new_file_instance(bed, "mv1", "12m", "3m", start=False)
    new_file_instance(bed, "mv2", "5m", "2m")
    for name, target in (("mv1", NODE2), ("mv2", NODE3)):
        contents = fill_disks(bed, name)
        state_before = where(bed, name)
        out = ok(bed.cl.gnt("instance", "move", "-f", "-n", target, name))
        for line in (
            f"Shutting down instance {name} on source node {NODE1}",
            "disk/0 is now listening, starting export",
            # A small disk may end before the master sees it connected (no
            # "is sending data" line then, as in Ganeti).
            "disk/1 finished sending data",
            "disk/1 finished receiving data",
            "Removing the disks on the original node",
        ):
            assert line in out, (line, out)
        assert pnode(bed, name) == target
        assert [p.read_bytes() for p in disk_files(bed, target, name)] == contents
        assert disk_files(bed, NODE1, name) == []
        expected = {target: "running"} if state_before else {}
        assert where(bed, name) == expected
    assert f"Starting instance mv2 on node {NODE3}" in out
    # And back: the moved disks are the instance's disks on its new node.
    ok(bed.cl.gnt("instance", "move", "-f", "-n", NODE1, "mv1"))
    assert pnode(bed, "mv1") == NODE1 and disk_files(bed, NODE2, "mv1") == []
    for name in ("mv1", "mv2"):
        ok(bed.cl.gnt("instance", "remove", "-f", name))


def test_diskless_instance_moves_without_copy(bed: Bed) -> None:
    # As Ganeti: no disk is unsuitable for copying.
    ok(add(bed.cl, "mvd", "-t", "diskless", "-o", "plain", "--no-install", "-n", NODE1))
    ok(bed.cl.gnt("instance", "move", "-f", "-n", NODE2, "mvd"))
    assert pnode(bed, "mvd") == NODE2 and where(bed, "mvd") == {NODE2: "running"}
    ok(bed.cl.gnt("instance", "remove", "-f", "mvd"))


def test_progress_lines_with_throughput_and_eta(bed: Bed) -> None:
    new_file_instance(bed, "mvp", "64m")
    source = bed.nodes[NODE1]
    source.run_sync(calls_impexp.test_impexp_gate(True))
    try:
        job_id = submit_move(bed, "mvp", NODE2)
        wait_paused(bed, job_id)
    finally:
        source.run_sync(calls_impexp.test_impexp_gate(False))
    with bed.cl.client() as client:
        assert wait_final(client, [job_id], timeout=120)[0][0] == "success"
    lines = job_log(bed, job_id)
    progress = [line for line in lines if line.startswith("disk/0 sent")]
    assert progress and all(PROGRESS.match(line) for line in progress), progress
    assert f"disk/0 is sending data on {NODE1}" in lines
    assert "disk/0 finished sending data" in lines
    ok(bed.cl.gnt("instance", "remove", "-f", "mvp"))


def _refused(bed: Bed, args: tuple[str, ...], text: str, rc: int = 1) -> None:
    before = cluster_state(bed.cl)
    failed(bed.cl.gnt("instance", "move", *args), text, rc=rc)
    assert cluster_state(bed.cl)["serial"] == before["serial"]


def test_refusals_change_nothing(bed: Bed) -> None:
    new_file_instance(bed, "mvr", "16m")
    contents = fill_disks(bed, "mvr")
    _refused(bed, ("-f", "-n", NODE1, "mvr"), f"Instance mvr is already on the node {NODE1}")
    _refused(bed, ("-f", "-n", "nosuch.example.com", "mvr"), "not known")
    _refused(bed, ("-f", "--compress", "gzip", "-n", NODE2, "mvr"), "compress")
    for flag, text in (("--drained", "Can't use drained node"),
                       ("--offline", "Can't use offline node")):  # fmt: skip
        ok(bed.cl.gnt("node", "modify", "--force", flag, "yes", NODE2))
        try:
            _refused(bed, ("-f", "-n", NODE2, "mvr"), f"{text} {NODE2}")
        finally:
            ok(bed.cl.gnt("node", "modify", "--force", flag, "no", NODE2))
    # A target without room: its file storage a 4 MiB tmpfs.
    with tmpfs(bed.paths(NODE3).file_storage_dir, "4m"):
        _refused(bed, ("-f", "-n", NODE3, "mvr"), f"Not enough disk space on target node {NODE3}")
    # A target that cannot run the hypervisor.
    state_dir = bed.paths(NODE3).run_dir / "fake-hypervisor"
    state_dir.mkdir(parents=True, exist_ok=True)
    away = state_dir.with_name("fake-hypervisor.away")
    state_dir.rename(away)
    state_dir.write_text("not a directory")
    try:
        _refused(bed, ("-f", "-n", NODE3, "mvr"), f"Target node {NODE3} cannot run hypervisor")
    finally:
        state_dir.unlink()
        away.rename(state_dir)
    assert pnode(bed, "mvr") == NODE1 and where(bed, "mvr") == {NODE1: "running"}
    assert [p.read_bytes() for p in disk_files(bed, NODE1, "mvr")] == contents
    assert disk_files(bed, NODE2, "mvr") == disk_files(bed, NODE3, "mvr") == []
    # Not confirmed: nothing happens.
    failed(bed.cl.gnt("instance", "move", "-n", NODE2, "mvr", stdin="n\n"))
    ok(bed.cl.gnt("instance", "remove", "-f", "mvr"))


def _restart(node: Noded) -> None:
    start_daemon(noded_cmd(node.address, node.port), daemon_env(node.paths), timeout=30)


@pytest.mark.slow
def test_target_killed_mid_copy(bed: Bed) -> None:
    new_file_instance(bed, "mvk", "32m", "4m")
    contents = fill_disks(bed, "mvk")
    source, target = bed.nodes[NODE1], bed.nodes[NODE3]
    source.run_sync(calls_impexp.test_impexp_gate(True))
    try:
        job_id = submit_move(bed, "mvk", NODE3)
        wait_paused(bed, job_id)
        assert len(disk_files(bed, NODE3, "mvk")) == 2  # the target's disks, partial
        pid = target.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: target.pid is None, timeout=30, what="node3's noded gone")
    finally:
        source.run_sync(calls_impexp.test_impexp_gate(False))
    try:
        with bed.cl.client() as client:
            status, error = wait_final(client, [job_id], ("opresult",), timeout=120)[0]
        assert status == "error"
        message = json.dumps(error)
        # The cause, from the end that failed (the source: its peer went away).
        for text in (
            f"from node {NODE1} to node {NODE3}",
            f"disk/0 failed to send data on {NODE1}: ",
        ):
            assert text in message, (text, message)
        lines = job_log(bed, job_id)
        assert any(f"Could not remove the partial disks on node {NODE3}" in x for x in lines)
        # The source is as it was: its disks, the config, the instance running again.
        assert pnode(bed, "mvk") == NODE1 and where(bed, "mvk") == {NODE1: "running"}
        assert [p.read_bytes() for p in disk_files(bed, NODE1, "mvk")] == contents
        assert len(disk_files(bed, NODE3, "mvk")) == 2
    finally:
        _restart(target)
    # Back, the target removes the partial disks it recorded.
    wait_until(lambda: not disk_files(bed, NODE3, "mvk"), timeout=30, what="partial disks gone")
    ok(bed.cl.gnt("instance", "remove", "-f", "mvk"))


def test_failed_copy_says_why(bed: Bed) -> None:
    new_file_instance(bed, "mvs", "16m")
    contents = fill_disks(bed, "mvs")
    source, storage = bed.nodes[NODE1], bed.paths(NODE2).file_storage_dir
    # Room enough when the move begins; none left once the copy is under way.
    with tmpfs(storage, "24m"):
        source.run_sync(calls_impexp.test_impexp_gate(True))
        try:
            job_id = submit_move(bed, "mvs", NODE2)
            wait_paused(bed, job_id)
            fill(storage)
        finally:
            source.run_sync(calls_impexp.test_impexp_gate(False))
        with bed.cl.client() as client:
            status, error = wait_final(client, [job_id], ("opresult",), timeout=120)[0]
        assert status == "error"
        cause = (
            f"Errors during disk copy from node {NODE1} to node {NODE2}: disk/0 failed to"
            f" receive data on {NODE2}: No space left on the device of "
        )
        assert cause in json.dumps(error), error
        assert disk_files(bed, NODE2, "mvs") == []
    assert pnode(bed, "mvs") == NODE1 and where(bed, "mvs") == {NODE1: "running"}
    assert [p.read_bytes() for p in disk_files(bed, NODE1, "mvs")] == contents
    ok(bed.cl.gnt("instance", "remove", "-f", "mvs"))


def test_job_cancelled_mid_copy(bed: Bed) -> None:
    new_file_instance(bed, "mvc", "32m")
    contents = fill_disks(bed, "mvc")
    source = bed.nodes[NODE1]
    source.run_sync(calls_impexp.test_impexp_gate(True))
    try:
        job_id = submit_move(bed, "mvc", NODE2)
        wait_paused(bed, job_id)
        ok(bed.cl.gnt("job", "cancel", "--kill", "--yes-do-it", str(job_id)))
        with bed.cl.client() as client:
            assert wait_final(client, [job_id], timeout=60)[0][0] == "canceled"
    finally:
        source.run_sync(calls_impexp.test_impexp_gate(False))
    assert disk_files(bed, NODE2, "mvc") == []
    assert pnode(bed, "mvc") == NODE1 and where(bed, "mvc") == {NODE1: "running"}
    assert [p.read_bytes() for p in disk_files(bed, NODE1, "mvc")] == contents
    ok(bed.cl.gnt("instance", "remove", "-f", "mvc"))


def test_hooks_environment(bed: Bed, tmp_path: Path) -> None:
    out = tmp_path / "env"
    for node in (NODE1, NODE2):
        for phase in ("pre", "post"):
            directory = bed.paths(node).hooks_dir / f"instance-move-{phase}.d"
            directory.mkdir(parents=True, exist_ok=True)
            script = directory / "50dump"
            script.write_text(f"#!/bin/sh\nenv > {out}.{node}.$GANETI_HOOKS_PHASE\n")
            script.chmod(0o755)
    new_file_instance(bed, "mvh", "1m", start=False)
    try:
        ok(bed.cl.gnt("instance", "move", "-f", "--shutdown-timeout", "7", "-n", NODE2, "mvh"))
    finally:
        for node in (NODE1, NODE2):
            for phase in ("pre", "post"):
                (bed.paths(node).hooks_dir / f"instance-move-{phase}.d" / "50dump").unlink()
    for node in (NODE1, NODE2):
        for phase in ("pre", "post"):
            text = Path(f"{out}.{node}.{phase}").read_text()
            env = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
            assert env["GANETI_HOOKS_PATH"] == "instance-move"
            assert env["GANETI_TARGET_NODE"] == NODE2
            assert env["GANETI_SHUTDOWN_TIMEOUT"] == "7"
            assert env["GANETI_INSTANCE_NAME"] == "mvh"
    ok(bed.cl.gnt("instance", "remove", "-f", "mvh"))
