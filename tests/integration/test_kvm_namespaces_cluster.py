"""kvm's ``use_namespaces`` through a whole cluster: two nodes with network
stacks of their own (network namespaces), real masterd and noded, gnt-*
commands, the ``corral-tiny`` OS, and one TCG guest with namespaces, a uid of
the pool and a chroot.  The guest boots, answers on ``gnt-instance console``,
migrates to the other node (into new namespaces there, the same guest), its
disk's data survives ``gnt-backup export`` and ``import`` (the imported guest
runs in namespaces too), and neither ``gnt-instance shutdown`` nor a kill -9
of QEMU leaves a process, a mount namespace or a file behind.

The tests run in order on the guest the module boots once (two boots in
all: the guest and its imported copy)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from corral import testbed
from corral.node.hypervisor.kvm.runtime import Layout, Runtime, alive
from corral.node.uidpool import UidPool
from corral.process.daemons import running_pid
from tests.helpers.cluster import PERMISSIVE_IPOLICY
from tests.helpers.kvm_guest import MARKER, cluster_hvparams, kill_leftovers, unique_uid_pool
from tests.helpers.netns import NetnsBed
from tests.helpers.tiny_os import MIN_DISK_MIB, TINY_OS, make_tiny_os
from tests.helpers.waiting import wait_until
from tests.integration.test_instance_console import ESCAPE, finish, read_until
from tests.integration.test_kvm_namespaces import NAMESPACE_KINDS, holders, inside, namespaces

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root"),
]

POOL = unique_uid_pool(4)
ISOLATED = "use_namespaces=true,security_model=pool,use_chroot=true"
NAME, COPY = "nsc1", "nsc2"
DISK_MARKER = "from-the-tiny-os"
DATA = "written-in-the-guest-before-export"


@dataclass
class Bed:
    cluster: testbed.Testbed

    @property
    def nodes(self) -> list[testbed.BedNode]:
        return self.cluster.nodes

    def gnt(self, *args: str) -> str:
        result = self.cluster.gnt(*args, timeout=300)
        assert result.returncode == 0, (result.stdout, result.stderr)
        assert "Traceback" not in result.stderr, result.stderr
        return result.stdout

    def placement(self, name: str) -> tuple[str, str]:
        out = self.gnt("instance", "list", "--no-headers", "-o", "pnode,status", name)
        pnode, status = out.split()
        return pnode, status

    def runtime(self, node: testbed.BedNode, name: str) -> Runtime:
        found = Layout(node.paths.run_dir).read_runtime(name)
        assert found is not None, f"{name} has no runtime on {node.name}"
        return found

    def noded(self, node: testbed.BedNode) -> int:
        pid = running_pid(node.paths.pid_file("corral-noded"))
        assert pid is not None, f"no noded on {node.name}"
        return pid


class GntConsole:
    """``gnt-instance console`` on the master node, on pipes; lines typed
    into the guest's shell, their answers read back."""

    def __init__(self, bed: Bed, name: str) -> None:
        argv = [sys.executable, "-m", "corral.cli.gnt_instance", "console", name]
        self.proc = subprocess.Popen(
            bed.cluster.network.wrap(1, argv),
            env={**os.environ, **bed.cluster.env()},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def run(self, command: str, answer: str, timeout: float = 120) -> bytes:
        """Type ``command``; what came until ``answer``."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        self.proc.stdin.flush()
        return read_until(self.proc, answer.encode(), timeout)

    def close(self) -> None:
        """Detach (the console's escape character); the command must end well."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(ESCAPE)
        self.proc.stdin.flush()
        rc, err = finish(self.proc)
        assert rc == 0, err


@pytest.fixture(scope="module")
def bed() -> Iterator[Bed]:
    root = Path(tempfile.mkdtemp(prefix="nsc", dir="/tmp"))  # short: socket paths
    hvparams = f"kvm:{cluster_hvparams()}"
    init = (*PERMISSIVE_IPOLICY, "--enabled-hypervisors=kvm", "-H", hvparams,
            "--uid-pool", f"{POOL[0]}-{POOL[1]}")  # fmt: skip
    try:
        with NetnsBed(2) as network:
            running = testbed.up(root, nodes=2, network=network, init_args=init)
            try:
                for node in running.nodes:
                    make_tiny_os(node.paths)
                yield Bed(running)
            finally:
                running.down()
                for node in running.nodes:
                    kill_leftovers(node.paths.run_dir)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def guest(bed: Bed) -> str:
    """The guest, booted on node 1 with namespaces, a pool uid and a chroot."""
    bed.gnt(
        "instance", "add", "--no-name-check", "--no-ip-check", "-t", "file",
        f"--disk=0:size={MIN_DISK_MIB}m", "-o", f"{TINY_OS}+default",
        "-O", f"marker={DISK_MARKER}", "--no-nics", "-B", "memory=128",
        "-H", f"kvm:{ISOLATED}", "-n", bed.nodes[0].name, NAME,
    )  # fmt: skip
    return NAME


def assert_isolated(bed: Bed, node: testbed.BedNode, name: str) -> Runtime:
    """``name``'s QEMU on ``node`` runs in namespaces other than noded's, as
    a uid of the pool, in its chroot, alone in its PID namespace."""
    runtime = bed.runtime(node, name)
    assert runtime.namespaces and runtime.chroot is not None
    assert runtime.uid is not None and POOL[0] <= runtime.uid <= POOL[1]
    noded, qemu = namespaces(bed.noded(node)), namespaces(runtime.pid)
    assert all(noded[kind] != qemu[kind] for kind in NAMESPACE_KINDS), (noded, qemu)
    ps = inside(runtime.pid, "mp", "ps", "-e", "-o", "pid=,user=,comm=")
    others = [line.split() for line in ps.stdout.splitlines() if not line.endswith(" ps")]
    assert [row[:2] for row in others] == [["1", str(runtime.uid)]], ps.stdout
    return runtime


def assert_gone(bed: Bed, node: testbed.BedNode, name: str, runtime: Runtime, mnt: str) -> None:
    """Nothing of ``name``'s QEMU left on ``node``: process, mount namespace
    (no process in it: its mounts went with it), files."""
    layout = Layout(node.paths.run_dir)
    wait_until(lambda: name not in layout.names(), 60, f"{name}'s runtime gone")
    wait_until(lambda: holders(mnt) == [], 30, "its mount namespace gone")
    assert str(layout.nsroot(name)) not in Path(f"/proc/{bed.noded(node)}/mountinfo").read_text()
    assert not alive(runtime)  # gone, or a zombie until init reaps it
    for path in (layout.nsroot(name), layout.qmp(name), layout.serial(name), layout.log(name)):
        assert not path.exists(), path
    assert runtime.chroot is not None and not Path(runtime.chroot).exists()


def test_the_guest_boots_isolated_and_its_console_works(bed: Bed, guest: str) -> None:
    assert bed.placement(guest) == (bed.nodes[0].name, "running")
    assert_isolated(bed, bed.nodes[0], guest)
    console = GntConsole(bed, guest)
    # Booting, or at its shell already: either way a prompt comes.
    console.run("", "# ")
    console.run("echo CORRAL-NS-$((6*7))", "CORRAL-NS-42")
    # The tiny OS's disk, mounted by the guest: the data written here is
    # what the export must carry.  A shell variable: what only this very
    # guest's memory holds (a migration must carry it).
    # (What is awaited is never in the echo of what was typed.)
    console.run("cat /mnt/disk/corral-disk-marker", DISK_MARKER)
    console.run(f"echo {DATA} >/mnt/disk/ns-data && sync && echo synced-$((1+1))", "synced-2")
    console.run("KEPT=in-guest-memory && echo kept-$KEPT", "kept-in-guest-memory")
    console.close()


def test_migration_moves_the_same_guest_into_new_namespaces(bed: Bed, guest: str) -> None:
    node1, node2 = bed.nodes
    source = bed.runtime(node1, guest)
    source_mnt = namespaces(source.pid)["mnt"]
    out = bed.gnt("instance", "migrate", "-f", "-n", node2.name, guest)
    assert "* memory transfer complete" in out, out
    # Live under KVM; under TCG (this machine) Corral pauses the guest for
    # the transfer (QEMU's live migration loses memory writes there).
    assert f"Migrating instance {guest} paused, not live: it runs under TCG" in out, out
    assert bed.placement(guest) == (node2.name, "running")
    assert_gone(bed, node1, guest, source, source_mnt)
    target = assert_isolated(bed, node2, guest)
    assert target.pid != source.pid
    # The same guest: its shell still holds what was set before, no new boot.
    console = GntConsole(bed, guest)
    seen = console.run("echo $KEPT-after-migration", "in-guest-memory-after-migration")
    console.close()
    assert MARKER.encode() not in seen


def test_shutdown_leaves_nothing_and_the_export_keeps_the_data(bed: Bed, guest: str) -> None:
    node1, node2 = bed.nodes
    running = bed.runtime(node2, guest)
    mnt = namespaces(running.pid)["mnt"]
    bed.gnt("instance", "shutdown", "--timeout=0", guest)
    assert_gone(bed, node2, guest, running, mnt)
    assert bed.placement(guest) == (node2.name, "ADMIN_down")

    out = bed.gnt("backup", "export", "-n", node1.name, guest)
    assert "disk/0 finished sending data" in out, out
    bed.gnt("instance", "remove", "-f", guest)
    bed.gnt(
        "backup", "import", "-n", node2.name, "-t", "file", "--src-node", node1.name,
        f"--src-dir=/srv/ganeti/export/{guest}", "--no-name-check", "--no-ip-check", COPY,
    )  # fmt: skip
    bed.gnt("instance", "startup", COPY)  # an import never starts it (as Ganeti's)
    assert bed.placement(COPY) == (node2.name, "running")
    # The export carried the instance's parameters: the copy is isolated too.
    assert_isolated(bed, node2, COPY)
    console = GntConsole(bed, COPY)
    console.run("", "# ")
    console.run("cat /mnt/disk/ns-data", DATA)
    console.close()


def test_qemu_killed_leaves_nothing(bed: Bed) -> None:
    node2 = bed.nodes[1]
    runtime = bed.runtime(node2, COPY)
    mnt = namespaces(runtime.pid)["mnt"]
    os.kill(runtime.pid, signal.SIGKILL)
    assert_gone(bed, node2, COPY, runtime, mnt)
    wait_until(lambda: bed.placement(COPY) == (node2.name, "ERROR_down"), 60, "ERROR_down")
    # Its uid went back to the pool: no process runs under it.
    assert runtime.uid is not None and runtime.uid not in UidPool(node2.paths).in_use()
    bed.gnt("instance", "remove", "-f", COPY)
