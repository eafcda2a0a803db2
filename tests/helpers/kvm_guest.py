"""Test guests on the kvm hypervisor object: their instance description and
their serial console, read line by line."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import uuid as uuid_module
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from corral.crypto import certs
from corral.hvparams import DEFAULTS
from corral.node.hypervisor.kvm import KvmHypervisor
from corral.node.hypervisor.kvm.runtime import Layout, alive
from corral.node.hypervisor.spec import InstanceSpec
from corral.paths import Paths
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.guest import guest_initramfs, guest_kernel
from tests.helpers.osdef import make_os

MARKER = "CORRAL-GUEST-UP"


# For every test guest's kernel: under TCG on a loaded machine, timer
# interrupts may come too slowly for the kernel's check of the IO-APIC timer
# at boot, which then panics ("IO-APIC + timer doesn't work!"); the check
# is for broken hardware, and is what virtual machines commonly turn off.
TCG_KERNEL_ARGS = "no_timer_check"


def unique_uid_pool(size: int) -> tuple[int, int]:
    """A uid range of ``size`` for a test's uid pool, drawn at random: uids
    are the host's, so two copies of a test running at once must not share
    theirs (the pool counts a uid another copy's QEMU runs as as taken)."""
    first = 50_000 + secrets.randbelow(2_500) * 4  # clear of the fixed 47xxx pools
    return first, first + size - 1


def guest_spec(name: str, kernel_args: str = "", memory: int = 128, **hvp: Any) -> InstanceSpec:
    """A test guest booting the busybox initramfs under TCG (KVM hangs here).

    Without network rules unless asked for: these guests' hypervisors share
    the machine's network stack, whose ruleset tests leave alone (the rules
    are tested in namespaces of their own: test_netrules*)."""
    hvparams = {
        **DEFAULTS["kvm"],
        "use_network_rules": False,
        "kernel_path": str(guest_kernel()),
        "initrd_path": str(guest_initramfs()),
        "kernel_args": f"quiet {TCG_KERNEL_ARGS} corral.hostname={name} {kernel_args}".strip(),
        "root_path": "",
        "serial_speed": 115200,
        "kvm_flag": "disabled",
        **hvp,
    }
    uuid = str(uuid_module.uuid5(uuid_module.NAMESPACE_DNS, name))
    wire = {"name": name, "uuid": uuid, "hypervisor": "kvm", "memory": memory}
    return InstanceSpec(
        name=name,
        uuid=uuid,
        hypervisor="kvm",
        os="tiny",
        memory=memory,
        vcpus=1,
        hvparams=hvparams,
        beparams={},
        wire={**wire, "hvparams": hvparams, "vcpus": 1},
    )


def kill_leftovers(run_dir: Path) -> None:
    """SIGKILL every QEMU still recorded under ``run_dir`` (a test's cleanup
    after a failure that left a guest behind)."""
    layout = Layout(run_dir)
    for name in layout.names():
        runtime = layout.read_runtime(name)
        if runtime is not None and alive(runtime):
            os.kill(runtime.pid, signal.SIGKILL)
    kill_mirror_daemons(run_dir)


def kill_mirror_daemons(run_dir: Path) -> None:
    """SIGKILL every qemu-storage-daemon of a mirrored disk recorded under
    ``run_dir`` (its pidfile on its command line: ours, not a reused pid),
    and detach the FUSE mounts they leave."""
    mirror = run_dir / "mirror"
    for pidfile in mirror.glob("*.pid"):
        try:
            pid = int(pidfile.read_text())
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if os.fsencode(str(pidfile)) in argv:
            os.kill(pid, signal.SIGKILL)
    for mountpoint in mirror.glob("*.fuse"):
        subprocess.run(["umount", "--lazy", str(mountpoint)], capture_output=True, check=False)


class Serial:
    """A guest's serial console: every line it printed since we connected."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.lines: list[str] = []
        self._writer = writer
        self._changed = asyncio.Condition()
        self._task = asyncio.create_task(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while line := await reader.readline():
            async with self._changed:
                self.lines.append(line.decode(errors="replace").strip())
                self._changed.notify_all()

    async def wait_for(self, text: str, timeout: float = 60.0, start: int = 0) -> int:
        """The index of the first line from ``start`` on that contains ``text``."""
        try:
            async with asyncio.timeout(timeout), self._changed:
                while True:
                    for index in range(start, len(self.lines)):
                        if text in self.lines[index]:
                            return index
                    await self._changed.wait()
        except TimeoutError:
            tail = "\n".join(self.lines[-20:])
            raise AssertionError(f"no {text!r} on the console; its last lines:\n{tail}") from None

    async def send(self, text: str) -> None:
        """Type ``text`` on the console (the guest's shell reads it)."""
        self._writer.write(text.encode())
        await self._writer.drain()

    def count(self, text: str) -> int:
        return sum(text in line for line in self.lines)

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._writer.close()


@contextlib.asynccontextmanager
async def serial(path: Path) -> AsyncIterator[Serial]:
    reader, writer = await asyncio.open_unix_connection(str(path))
    console = Serial(reader, writer)
    try:
        yield console
    finally:
        await console.close()


@contextlib.asynccontextmanager
async def booted(hv: KvmHypervisor, spec: InstanceSpec) -> AsyncIterator[Serial]:
    """Start ``spec`` paused, attach to its serial console, let it run, and
    wait for its marker; the guest is stopped (hard) afterwards."""
    await hv.start(spec, paused=True)
    try:
        async with serial(hv.layout.serial(spec.name)) as console:
            await hv.monitors[spec.name].execute("cont")
            await console.wait_for(MARKER)
            yield console
    finally:
        await hv.stop(spec.name, force=True)


def cluster_hvparams(kernel_args: str = "quiet") -> str:
    """``gnt-cluster init -H kvm:...`` for the test guest: direct kernel boot
    of the test initramfs under TCG (KVM hangs stock guests on this machine)."""
    return ",".join(
        (
            f"kernel_path={guest_kernel()}",
            f"initrd_path={guest_initramfs()}",
            f"kernel_args={kernel_args} {TCG_KERNEL_ARGS}",
            "kvm_flag=disabled",
            "serial_speed=115200",
        )
    )


@contextlib.contextmanager
def short_root(prefix: str) -> Iterator[Path]:
    """A root in /tmp short enough for QEMU's unix socket paths (108 bytes);
    every guest still recorded under it killed, and the root removed, after."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        yield root
    finally:
        kill_leftovers(Paths(root).run_dir)
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def kvm_cluster(prefix: str, kernel_args: str = "quiet") -> Iterator[TestCluster]:
    """A kvm cluster with the corral-tiny OS under a :func:`short_root`."""
    init = ("--enabled-hypervisors=kvm", "-H", f"kvm:{cluster_hvparams(kernel_args)}")
    with short_root(prefix) as root, running_cluster(root, *init) as cl:
        try:
            make_os(cl.paths, "tiny")
            yield cl
        finally:
            # Guests outlive their noded by design: a failed test's are killed here.
            kill_leftovers(cl.paths.run_dir)


@contextlib.asynccontextmanager
async def kvm_hypervisor(root: Path) -> AsyncIterator[KvmHypervisor]:
    """A kvm hypervisor on the node root ``root``, its guests stopped and
    itself closed afterwards."""
    hypervisor = KvmHypervisor(Paths(root))
    await hypervisor.resume()
    try:
        yield hypervisor
    finally:
        for name in list(hypervisor.monitors):
            await hypervisor.stop(name, force=True)
        await hypervisor.close()


@contextlib.asynccontextmanager
async def hypervisor_pair(address: str) -> AsyncIterator[tuple[KvmHypervisor, KvmHypervisor]]:
    """Two kvm hypervisors on two short node roots whose certificates (for
    ``address``) one CA signed, as two nodes of a cluster; their guests
    stopped and the roots removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="kvmig", dir="/tmp"))
    ca_cert, ca_key = certs.make_ca("cluster.example.com", 30)
    roots = (base / "a", base / "b")
    try:
        for index, root in enumerate(roots, 1):
            paths = Paths(root)
            paths.data_dir.mkdir(parents=True)
            certs.write_pem(paths.ca_cert, ca_cert, private=False)
            certs.write_node_cert(paths, ca_cert, ca_key, f"node{index}.example.com", address)
        async with kvm_hypervisor(roots[0]) as first, kvm_hypervisor(roots[1]) as second:
            yield first, second
    finally:
        for root in roots:
            kill_leftovers(Paths(root).run_dir)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    # The README's kvm example: `gnt-cluster modify -H "kvm:$(python -m tests.helpers.kvm_guest)"`.
    print(cluster_hvparams())
