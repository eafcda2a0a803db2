"""A kvm guest on a mirrored disk (issue 26): a real two-node cluster, Ganeti's
``gnt-instance add -t drbd -n PNODE:SNODE``, the ``corral-tiny`` OS writing
the disk through the primary's quorum (FUSE), a QEMU guest under TCG counting
its boots in a file on that disk through its own quorum; every write on both
nodes' copies, and the link between them TLS under the cluster CA."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.node.hypervisor.kvm.runtime import Layout
from corral.node.storage import qsd
from corral.paths import Paths
from tests.helpers.cluster import TestCluster
from tests.helpers.instances import add, ok, query
from tests.helpers.kvm_guest import kill_leftovers
from tests.helpers.kvm_pair import NODE1, NODE2, kvm_two_nodes
from tests.helpers.multinode import add_node
from tests.helpers.noded import Noded, daemon_env, start_noded
from tests.helpers.serial_console import SerialConsole
from tests.helpers.tiny_os import MIN_DISK_MIB, TINY_OS
from tests.helpers.waiting import wait_until
from tests.helpers.writer_guest import (
    READ_BACK,
    WRITER_ARGS,
    WROTE,
    last_written,
    sector_count,
)

pytestmark = pytest.mark.slow

NODE3 = "node3.example.com"
MARKER = "on-two-nodes"
SAID = re.compile(r"CORRAL-GUEST-(?:UP|DISK|BOOT) \S+")


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[tuple[TestCluster, Noded]]:
    """A kvm cluster of two nodes with ``corral-tiny``, mirrored enabled;
    its guests count their boots on their disk (direct kernel boot)."""
    # Ganeti's name in the policy: what Ganeti's tools give.
    templates = ("diskless,file,mirrored", "diskless,file,drbd")
    with kvm_two_nodes("kvmmir", "corral.reboot=1", templates) as pair:
        yield pair


@pytest.fixture(scope="module")
def node3(two_nodes: tuple[TestCluster, Noded]) -> Iterator[Noded]:
    """A third node of the cluster (a new secondary's)."""
    cl, _ = two_nodes
    node = add_node(cl, cl.paths.root / "n3", NODE3)
    try:
        yield node
    finally:
        node.stop()
        kill_leftovers(node.paths.run_dir)


def boots(cl: TestCluster, name: str) -> list[str]:
    """Start ``name``, stop it once its guest is ready; what the guest said."""
    ok(cl.gnt("instance", "startup", name))
    console = SerialConsole(Layout(cl.paths.run_dir).serial(name))
    try:
        console.wait_for("CORRAL-GUEST-READY")  # after the disk's lines
    finally:
        console.close()
    ok(cl.gnt("instance", "shutdown", "--timeout=60", name))
    return SAID.findall(console.seen())


def add_writer(cl: TestCluster, name: str, primary: str, secondary: str) -> None:
    """A started guest counting on its 16 MiB mirrored disk (see writer_guest)."""
    ok(
        add(
            cl, name, "-t", "mirrored", "--disk=0:size=16m", "-o", f"{TINY_OS}+default",
            "--no-install", "--no-nics", "-n", f"{primary}:{secondary}", "-B", "memory=128",
            "-H", f"kvm:kernel_args={WRITER_ARGS}",
        )
    )  # fmt: skip


def copies(cl: TestCluster, node2: Noded, name: str) -> list[Path]:
    """The instance's disk file on node1 and on node2 (the same path on both)."""
    found = []
    for paths in (cl.paths, node2.paths):
        [path] = (paths.file_storage_dir / name).glob("*.mirrored.disk0")
        found.append(path)
    return found


def test_every_write_reaches_both_copies(two_nodes: tuple[TestCluster, Noded]) -> None:
    cl, node2 = two_nodes
    ok(
        add(
            cl, "db", "-t", "drbd", f"--disk=0:size={MIN_DISK_MIB}m", "-o", f"{TINY_OS}+default",
            "-O", f"marker={MARKER}", "--no-nics", "-n", f"{NODE1}:{NODE2}", "-B", "memory=128",
            "--no-start",
        )
    )  # fmt: skip
    assert query(cl, ["disk_template", "pnode", "snodes"], "db")["db"] == {
        "disk_template": "mirrored",
        "pnode": NODE1,
        "snodes": [NODE2],
    }
    primary, secondary = copies(cl, node2, "db")
    assert primary.read_bytes() == secondary.read_bytes()  # the OS scripts' writes
    assert MARKER.encode() in secondary.read_bytes()
    written = primary.read_bytes()

    for count in (1, 2):
        assert boots(cl, "db") == [
            "CORRAL-GUEST-UP corral-guest",
            f"CORRAL-GUEST-DISK {MARKER}",
            f"CORRAL-GUEST-BOOT {count}",
        ]
        data = primary.read_bytes()
        assert data != written  # the guest wrote its count
        assert secondary.read_bytes() == data
        written = data

    ok(cl.gnt("instance", "remove", "-f", "db"))
    assert not primary.exists() and not secondary.exists()


def test_a_dead_secondary_is_recorded_outdated_before_the_guest_goes_on(
    two_nodes: tuple[TestCluster, Noded],
) -> None:
    cl, node2 = two_nodes
    add_writer(cl, "w1", NODE1, NODE2)
    console = SerialConsole(Layout(cl.paths.run_dir).serial("w1"))
    try:
        console.wait_for("CORRAL-GUEST-WROTE 5")
        primary, secondary = copies(cl, node2, "w1")
        [disk] = query(cl, ["disk.uuids"], "w1")["w1"]["disk.uuids"]
        export = qsd.running(node2.paths, disk, "nbd")
        assert export is not None
        os.kill(export, signal.SIGKILL)
        # The guest paused on the failed write; the master recorded node2's
        # copy as outdated and had the guest go on: it counts on.
        acknowledged = last_written(console.seen())
        console.wait_for(f"CORRAL-GUEST-WROTE {acknowledged + 5}\\b", timeout=60)
        assert "WRITE-FAILED" not in console.seen()
    finally:
        console.close()
    info = ok(cl.gnt("instance", "info", "w1"))
    assert f"copies: {NODE1} (current), {NODE2} (outdated); sync generation 1" in info, info
    assert sector_count(primary) >= acknowledged + 5
    assert sector_count(secondary) <= acknowledged + 1  # nothing reached it since

    # activate-disks brings the export back and resyncs it while the guest writes.
    out = ok(cl.gnt("instance", "activate-disks", "w1"))
    assert "* Instance w1's disks are in sync" in out, out
    info = ok(cl.gnt("instance", "info", "w1"))
    assert f"copies: {NODE1} (current), {NODE2} (current); sync generation 2" in info, info
    console = SerialConsole(Layout(cl.paths.run_dir).serial("w1"))
    try:
        resynced = last_written(console.wait_for(WROTE).group(0))
        console.wait_for(f"CORRAL-GUEST-WROTE {resynced + 5}\\b", timeout=60)
    finally:
        console.close()
    ok(cl.gnt("instance", "shutdown", "--timeout=0", "w1"))
    assert primary.read_bytes() == secondary.read_bytes()
    ok(cl.gnt("instance", "remove", "-f", "--shutdown-timeout=0", "w1"))
    assert not primary.exists() and not secondary.exists()


def test_a_failover_boots_the_guest_on_the_secondary_with_every_acknowledged_write(
    two_nodes: tuple[TestCluster, Noded],
) -> None:
    cl, node2 = two_nodes
    add_writer(cl, "w2", NODE1, NODE2)
    on1, on2 = copies(cl, node2, "w2")
    console = SerialConsole(Layout(cl.paths.run_dir).serial("w2"))
    try:
        console.wait_for("CORRAL-GUEST-WROTE 5")
        # The guest is cut off mid-write (no clean shutdown), as by a crash.
        out = ok(cl.gnt("instance", "failover", "-f", "--shutdown-timeout=0", "w2"))
        acknowledged = last_written(console.seen())
    finally:
        console.close()
    assert "* checking disk consistency between source and target" in out, out
    assert query(cl, ["pnode", "snodes"], "w2")["w2"] == {"pnode": NODE2, "snodes": [NODE1]}
    console = SerialConsole(Layout(node2.paths.run_dir).serial("w2"))
    try:
        found = console.wait_for(READ_BACK)
        assert int(found.group(1)) >= acknowledged > 0
        console.wait_for("CORRAL-GUEST-WROTE 5")  # through node2's quorum now
    finally:
        console.close()
    info = ok(cl.gnt("instance", "info", "w2"))
    assert f"copies: {NODE2} (current), {NODE1} (current)" in info, info
    ok(cl.gnt("instance", "shutdown", "--timeout=0", "w2"))
    assert on1.read_bytes() == on2.read_bytes()
    ok(cl.gnt("instance", "remove", "-f", "--shutdown-timeout=0", "w2"))
    assert not on1.exists() and not on2.exists()


def counts_on(run_dir: Path, name: str, moved: bool = True) -> int:
    """The running guest ``name`` (on the node of that run directory) counts
    on, five more writes (``moved`` there: without booting again); the last
    value it wrote."""
    console = SerialConsole(Layout(run_dir).serial(name))
    try:
        seen = last_written(console.wait_for(WROTE).group(0))
        console.wait_for(f"CORRAL-GUEST-WROTE {seen + 5}\\b", timeout=60)
        assert "WRITE-FAILED" not in console.seen()
        assert not moved or "CORRAL-GUEST-WRITER" not in console.seen()
        return last_written(console.seen())
    finally:
        console.close()


def test_a_live_migration_to_the_secondary_and_back_keeps_every_write(
    two_nodes: tuple[TestCluster, Noded],
) -> None:
    cl, node2 = two_nodes
    add_writer(cl, "w5", NODE1, NODE2)
    on1, on2 = copies(cl, node2, "w5")
    before = counts_on(cl.paths.run_dir, "w5", moved=False)
    out = ok(cl.gnt("instance", "migrate", "-f", "w5"))
    assert "* checking disk consistency between source and target" in out, out
    assert query(cl, ["pnode", "snodes"], "w5")["w5"] == {"pnode": NODE2, "snodes": [NODE1]}
    info = ok(cl.gnt("instance", "info", "w5"))
    assert f"copies: {NODE2} (current), {NODE1} (current)" in info, info
    moved = counts_on(node2.paths.run_dir, "w5")  # through node2's quorum now
    assert moved > before
    ok(cl.gnt("instance", "migrate", "-f", "w5"))
    assert query(cl, ["pnode", "snodes"], "w5")["w5"] == {"pnode": NODE1, "snodes": [NODE2]}
    assert counts_on(cl.paths.run_dir, "w5") > moved
    ok(cl.gnt("instance", "shutdown", "--timeout=0", "w5"))
    assert on1.read_bytes() == on2.read_bytes()
    ok(cl.gnt("instance", "remove", "-f", "--shutdown-timeout=0", "w5"))


def test_a_dead_primary_fails_over_with_every_acknowledged_write_and_never_back(
    two_nodes: tuple[TestCluster, Noded],
) -> None:
    cl, node2 = two_nodes
    add_writer(cl, "w3", NODE2, NODE1)
    on1, on2 = copies(cl, node2, "w3")
    console = SerialConsole(Layout(node2.paths.run_dir).serial("w3"))
    try:
        console.wait_for(r"CORRAL-GUEST-WROTE 5\r?\n")  # its line complete
        # Node2 dies: its noded, the guest's QEMU, everything of it.
        pid = node2.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        kill_leftovers(node2.paths.run_dir)
        console.wait_for("CORRAL-GUEST-WROTE|$", timeout=5)  # what was printed, read
        acknowledged = last_written(console.seen())
    finally:
        console.close()
    assert acknowledged >= 5
    failed = cl.gnt("instance", "failover", "-f", "w3")
    assert failed.rc != 0 and f"Could not shutdown instance w3 on node {NODE2}" in failed.stderr
    # As Ganeti's procedure: the dead node marked offline, then the failover.
    ok(cl.gnt("node", "modify", "-O", "yes", NODE2))
    out = ok(cl.gnt("instance", "failover", "-f", "w3"))
    assert f"please make sure node {NODE2} is down" in out, out
    console = SerialConsole(Layout(cl.paths.run_dir).serial("w3"))
    try:
        found = console.wait_for(READ_BACK)
        assert int(found.group(1)) >= acknowledged
        console.wait_for("CORRAL-GUEST-WROTE 5")  # node1's copy alone
    finally:
        console.close()
    info = ok(cl.gnt("instance", "info", "w3"))
    assert f"copies: {NODE1} (current), {NODE2} (outdated); sync generation 1" in info, info
    # Node2 comes back: back to its copy is refused; a resync (a full copy:
    # the dead primary's copy may hold writes never acknowledged) makes it current.
    start_noded(node2.paths, node2.address, node2.port)
    ok(cl.gnt("node", "modify", "--force", "-O", "no", NODE2))
    refused = cl.gnt("instance", "failover", "-f", "w3")
    assert refused.rc != 0
    assert "Disk 0 is degraded on target node, aborting failover" in refused.stderr
    # Ganeti's way to find and repair them: verify-disks activates the disks.
    out = ok(cl.gnt("cluster", "verify-disks"))
    assert "Activating disks for instance 'w3'" in out, out
    again = ok(cl.gnt("cluster", "verify-disks"))
    assert "No disks need to be activated." in again and "Activating" not in again, again
    info = ok(cl.gnt("instance", "info", "w3"))
    assert f"copies: {NODE1} (current), {NODE2} (current); sync generation 2" in info, info
    ok(cl.gnt("instance", "shutdown", "--timeout=0", "w3"))
    assert on1.read_bytes() == on2.read_bytes()
    ok(cl.gnt("instance", "remove", "-f", "--shutdown-timeout=0", "w3"))
    assert not on1.exists() and not on2.exists()


def test_replace_disks_to_a_new_node_while_the_guest_writes_then_failover_to_it(
    two_nodes: tuple[TestCluster, Noded], node3: Noded
) -> None:
    cl, node2 = two_nodes
    add_writer(cl, "w4", NODE1, NODE2)
    on1, on2 = copies(cl, node2, "w4")
    console = SerialConsole(Layout(cl.paths.run_dir).serial("w4"))
    try:
        console.wait_for("CORRAL-GUEST-WROTE 5")
        out = ok(cl.gnt("instance", "replace-disks", "-n", NODE3, "w4"))
        written = last_written(console.seen())
        console.wait_for(f"CORRAL-GUEST-WROTE {written + 5}\\b", timeout=60)
        assert "WRITE-FAILED" not in console.seen()
        out += ok(cl.gnt("instance", "shutdown", "--timeout=0", "w4"))
        acknowledged = last_written(console.seen())
    finally:
        console.close()
    assert "Replacing disk(s) 0 for instance 'w4'" in out, out
    assert query(cl, ["pnode", "snodes"], "w4")["w4"] == {"pnode": NODE1, "snodes": [NODE3]}
    info = ok(cl.gnt("instance", "info", "w4"))
    assert f"copies: {NODE1} (current), {NODE3} (current)" in info, info
    [on3] = (node3.paths.file_storage_dir / "w4").glob("*.mirrored.disk0")
    assert not on2.exists()
    assert on3.read_bytes() == on1.read_bytes()
    assert sector_count(on3) >= acknowledged
    # Its data is intact where it now fails over to.
    ok(cl.gnt("instance", "failover", "-f", "w4"))
    ok(cl.gnt("instance", "startup", "w4"))
    console = SerialConsole(Layout(node3.paths.run_dir).serial("w4"))
    try:
        found = console.wait_for(READ_BACK)
        assert int(found.group(1)) >= acknowledged
        console.wait_for("CORRAL-GUEST-WROTE 5")
    finally:
        console.close()
    ok(cl.gnt("instance", "remove", "-f", "--shutdown-timeout=0", "w4"))
    assert not on1.exists() and not on3.exists()


# ganeti-watcher (issue 27)
def watcher(paths: Paths) -> str:
    """ganeti-watcher run on the node of ``paths``; what it logged this time."""
    log = paths.log_dir / "watcher.log"
    before = log.read_text() if log.exists() else ""
    run = subprocess.run(
        [sys.executable, "-m", "corral.tools.watcher"],
        env={**os.environ, **daemon_env(paths)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    logged = log.read_text().removeprefix(before)
    assert run.returncode == 0, logged
    return logged


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def test_the_watcher_brings_a_secondary_back_in_sync_and_restarts_a_killed_guest(
    two_nodes: tuple[TestCluster, Noded],
) -> None:
    """What a reboot of the secondary's node does to it (its noded and its
    copy's export gone), then the watcher on each node: node2's starts its
    noded again, the master's resyncs the copy left behind; a guest killed
    under it is started again."""
    cl, node2 = two_nodes
    watcher(cl.paths)  # the nodes' boot ids recorded
    add_writer(cl, "w5", NODE1, NODE2)
    console = SerialConsole(Layout(cl.paths.run_dir).serial("w5"))
    try:
        console.wait_for("CORRAL-GUEST-WROTE 5")
        [disk] = query(cl, ["disk.uuids"], "w5")["w5"]["disk.uuids"]
        export = qsd.running(node2.paths, disk, "nbd")
        noded = node2.pid
        assert export is not None and noded is not None
        started_as = cmdline(noded)
        os.kill(noded, signal.SIGKILL)
        os.kill(export, signal.SIGKILL)
        acknowledged = last_written(console.seen())
        console.wait_for(f"CORRAL-GUEST-WROTE {acknowledged + 5}\\b", timeout=60)
    finally:
        console.close()
    info = ok(cl.gnt("instance", "info", "w5"))
    assert f"copies: {NODE1} (current), {NODE2} (outdated); sync generation 1" in info, info
    wait_until(lambda: node2.pid is None, timeout=30, what="node2's noded to die")

    logged = watcher(node2.paths)
    assert node2.pid is not None and node2.pid != noded
    # As it was started, less the join token it used up (if it was started with one).
    if "--join-token-file" in started_as:
        joined = started_as.index("--join-token-file")
        started_as = started_as[:joined] + started_as[joined + 2 :]
    assert cmdline(node2.pid) == started_as
    assert f"Restarted daemon corral-noded (pid {node2.pid}): " in logged, logged

    logged = watcher(cl.paths)
    assert "Activating disks for instance 'w5'" in logged, logged
    info = ok(cl.gnt("instance", "info", "w5"))
    assert f"copies: {NODE1} (current), {NODE2} (current); sync generation 2" in info, info

    runtime = Layout(cl.paths.run_dir).read_runtime("w5")
    assert runtime is not None
    os.kill(runtime.pid, signal.SIGKILL)
    wait_until(
        lambda: query(cl, ["status"], "w5")["w5"]["status"] == "ERROR_down",
        timeout=30,
        what="w5 to be down",
    )
    logged = watcher(cl.paths)
    assert "Restarting instance 'w5' (attempt #1)" in logged, logged
    assert query(cl, ["status"], "w5")["w5"]["status"] == "running"
    console = SerialConsole(Layout(cl.paths.run_dir).serial("w5"))
    try:
        found = console.wait_for(READ_BACK)
        assert int(found.group(1)) >= acknowledged + 5  # on the resynced copies
    finally:
        console.close()
    ok(cl.gnt("instance", "remove", "-f", "--shutdown-timeout=0", "w5"))
