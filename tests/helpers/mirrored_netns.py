"""The death of a mirrored instance's primary node (issue 26), on a kvm
cluster of three nodes each in a network namespace of its own
(tests/helpers/netns.py, corral/testbed.py): real noded on each, masterd on
node1, QEMU guests under TCG, the copies linked by NBD over TLS between the
namespaces' addresses.

One run (:func:`kill_primary_once`): the guest writes a counter to its
mirrored disk, each value flushed before it prints it; everything of its
primary node is killed at once (every process in the node's namespace:
noded, the guest's QEMU, the exports); the instance fails over to its
secondary as Ganeti's procedure has it (the dead node marked offline); the
guest boots there and reads its counter back.  Then the node comes back and
``activate-disks`` resyncs its copy (a full copy: it may hold writes never
acknowledged), so that the next run can kill the other node.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from corral import testbed
from corral.node.hypervisor.kvm.runtime import Layout
from tests.helpers.cluster import PERMISSIVE_IPOLICY
from tests.helpers.instances import NO_CHECKS
from tests.helpers.kvm_guest import cluster_hvparams, kill_leftovers, short_root
from tests.helpers.netns import NetnsBed
from tests.helpers.serial_console import SerialConsole
from tests.helpers.tiny_os import TINY_OS, make_tiny_os
from tests.helpers.waiting import wait_until
from tests.helpers.writer_guest import READ_BACK, WRITER_ARGS, WROTE, last_written

NODES = 3


@dataclass
class KvmNetBed:
    """The running bed."""

    bed: testbed.Testbed
    network: NetnsBed

    def gnt(self, command: str, *args: str) -> str:
        """``gnt-<command> args`` on the master; its output (AssertionError if it fails)."""
        done = self.bed.gnt(command, *args, timeout=300)
        assert done.returncode == 0, f"gnt-{command} {' '.join(args)}: {done.stderr}"
        return done.stdout

    def add_writer(self, name: str, primary: str, secondary: str) -> None:
        """A started guest counting on its 16 MiB mirrored disk."""
        self.gnt(
            "instance", "add", *NO_CHECKS, "-t", "mirrored", "--disk=0:size=16m",
            "-o", f"{TINY_OS}+default", "--no-install", "--no-nics",
            "-n", f"{primary}:{secondary}", "-B", "memory=128", name,
        )  # fmt: skip

    def serial(self, node: str, instance: str) -> Path:
        return Layout(self.bed.node(node).paths.run_dir).serial(instance)

    def kill_node(self, node: str) -> None:
        """SIGKILL every process in the node's namespace, until none is left."""
        namespace = self.network.namespace(self.bed.node(node).index)

        def pids() -> list[int]:
            done = subprocess.run(
                ["ip", "netns", "pids", namespace], capture_output=True, text=True, check=True
            )
            return [int(pid) for pid in done.stdout.split()]

        def none_left() -> bool:
            for pid in pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            return not pids()

        wait_until(none_left, 30, f"every process of {node} gone")

    def restart_node(self, node: str) -> None:
        """The node's noded again (its guests are gone: it cleans up after them)."""
        bed_node = self.bed.node(node)
        testbed.start_joining(
            bed_node.paths,
            bed_node.address,
            self.bed.port,
            None,
            lambda argv: self.network.wrap(bed_node.index, argv),
        )


@contextlib.contextmanager
def kvm_netns_bed(prefix: str) -> Iterator[KvmNetBed]:
    """The bed, ``corral-tiny`` on every node and mirrored enabled; all of it gone after."""
    hvparams = cluster_hvparams(WRITER_ARGS)
    with short_root(prefix) as root, NetnsBed(NODES) as network:
        init = ("--enabled-hypervisors=kvm", "-H", f"kvm:{hvparams}", *PERMISSIVE_IPOLICY)
        bed = testbed.up(root, nodes=NODES, init_args=init, network=network)
        try:
            for node in bed.nodes:
                make_tiny_os(node.paths)
            net = KvmNetBed(bed, network)
            net.gnt(
                "cluster", "modify", "--enabled-disk-templates=diskless,file,mirrored",
                "--ipolicy-disk-templates=diskless,file,mirrored",
            )  # fmt: skip
            yield net
        finally:
            bed.down()
            for node in bed.nodes:
                kill_leftovers(node.paths.run_dir)


@dataclass(frozen=True)
class Outcome:
    """One run: the last value the guest printed as written before its node
    died, and the value it read back when it booted on the other node."""

    killed: str
    acknowledged: int
    read_back: int
    # From the kill to the guest's first write on the other node (the
    # offline mark and the failover made at once, as by a script).
    down_seconds: float


def kill_primary_once(net: KvmNetBed, name: str) -> Outcome:
    """One run (see the module); the instance's roles are swapped after it."""
    fields = net.gnt("instance", "list", "--no-headers", "-o", "pnode,snodes", name).split()
    primary, secondary = fields[0], fields[1]
    console = SerialConsole(net.serial(primary, name))
    try:
        written = last_written(console.wait_for(WROTE).group(0))
        console.wait_for(f"CORRAL-GUEST-WROTE {written + 5}\\b", timeout=60)
        killed_at = time.monotonic()
        net.kill_node(primary)
        console.wait_for("CORRAL-GUEST-WROTE|$", timeout=5)  # what was printed, read
        acknowledged = last_written(console.seen())
    finally:
        console.close()
    net.gnt("node", "modify", "-O", "yes", primary)
    net.gnt("instance", "failover", "-f", name)
    console = SerialConsole(net.serial(secondary, name))
    try:
        read_back = int(console.wait_for(READ_BACK).group(1))
        console.wait_for(WROTE)
        down = time.monotonic() - killed_at
        console.wait_for(f"CORRAL-GUEST-WROTE {read_back + 5}\\b", timeout=60)
    finally:
        console.close()
    net.restart_node(primary)
    net.gnt("node", "modify", "--force", "-O", "no", primary)
    out = net.gnt("instance", "activate-disks", name)
    assert f"* Instance {name}'s disks are in sync" in out, out
    return Outcome(primary, acknowledged, read_back, down)
