"""Consoles of real QEMU guests (TCG): noded's relay to the kvm hypervisor's
serial socket, and ``gnt-instance console`` through a whole cluster; commands
typed into the guest's shell, their output read back."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from corral.rpc.calls_console import instance_console
from corral.rpc.calls_instance import instance_shutdown, instance_start
from corral.rpc.wire import InstanceWire
from tests.helpers.cluster import TestCluster, unique_loopback
from tests.helpers.console import Console
from tests.helpers.instances import add, ok
from tests.helpers.kvm_guest import MARKER, guest_spec
from tests.helpers.kvm_guest import kvm_cluster as kvm_guest_cluster
from tests.helpers.noded import Noded, make_node_root, running_noded
from tests.integration.test_instance_console import ESCAPE, console_process, finish, read_until

NAME = "guest1.example.com"


@pytest.fixture
def noded() -> Iterator[Noded]:
    # A short root: QEMU's unix socket paths have at most 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="h6k", dir="/tmp"))
    address = unique_loopback()
    try:
        paths = make_node_root(root, node_ip=address)
        with running_noded(paths, address) as node:
            yield node
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
async def test_a_command_typed_through_the_relay_runs_in_the_guest(noded: Noded) -> None:
    wire = cast("InstanceWire", dict(guest_spec(NAME, memory=128).wire))
    async with noded.client() as rpc:
        await rpc.run(noded.target, instance_start(wire, False))
        try:
            console = Console(noded, NAME)
            try:
                # The guest may or may not have reached its shell: an empty line
                # makes a running shell show its prompt, else its banner comes.
                console.type("\n")
                console.wait_for(b"CORRAL-GUEST-SHELL", b"# ")
                # Attached right after QEMU started: the kernel's boot (seconds
                # under TCG) comes before the marker, which arrives through the relay.
                assert f"{MARKER} {NAME}".encode() in console.seen
                console.type("echo hi-$((40 + 2))\n")
                console.wait_for(b"hi-42")
            finally:
                console.sock.close()
            (described,) = await rpc.run(noded.target, instance_console([wire], "n1"))
            assert described["kind"] == "ssh" and described["host"] == "n1"
            serial = noded.paths.run_dir
            assert str(described["command"][-1]).startswith(f"UNIX-CONNECT:{serial}")
        finally:
            await rpc.run(noded.target, instance_shutdown("kvm", NAME, 0))


@pytest.fixture
def kvm_cluster() -> Iterator[TestCluster]:
    """A cluster of kvm guests booting the test initramfs to its shell (TCG)."""
    with kvm_guest_cluster("h6c", kernel_args="ro") as cl:
        try:
            yield cl
        finally:
            cl.gnt("instance", "remove", "-f", "--shutdown-timeout=0", NAME)


@pytest.mark.slow
def test_gnt_instance_console_attaches_to_a_guest(kvm_cluster: TestCluster) -> None:
    cl = kvm_cluster
    args = ("-t", "diskless", "-o", "tiny+default", "--no-nics", "-B", "memory=128")
    ok(add(cl, NAME, *args))
    proc = console_process(cl, NAME)
    assert proc.stdin is not None
    try:
        # Booting, or at its shell already: either way a prompt comes.
        proc.stdin.write(b"\n")
        proc.stdin.flush()
        read_until(proc, b"# ", timeout=120)
        proc.stdin.write(b"echo hi-$((40 + 2))\n")
        proc.stdin.flush()
        read_until(proc, b"hi-42")
        # A reboot inside the same QEMU: the console stays attached, the boot shows.
        ok(cl.gnt("instance", "reboot", "--type=soft", NAME))
        read_until(proc, MARKER.encode(), timeout=120)
        proc.stdin.write(ESCAPE)
        proc.stdin.flush()
        rc, err = finish(proc)
        assert rc == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            finish(proc)
