"""qemu-storage-daemon for mirrored disks (corral.node.storage.qsd): the
secondary's NBD export under TLS, the primary's quorum exported by FUSE;
real q-s-d, real TLS under a cluster CA made here, nodes on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from corral import errors
from corral.crypto.certs import make_ca, write_node_cert, write_pem
from corral.node.storage import qsd
from corral.paths import Paths
from tests.helpers.noded import free_port
from tests.helpers.waiting import wait_until

HOST = "127.0.0.1"
SIZE = 4 * 1024 * 1024

pytestmark = pytest.mark.skipif(not os.path.exists(qsd.QSD), reason="no qemu-storage-daemon")


@dataclass
class Bed:
    """Node A (primary), node B (secondary) of one cluster; node C of another;
    node D trusting the cluster's CA, with a certificate of another CA."""

    a: Paths
    b: Paths
    c: Paths
    d: Paths
    port: int
    disk: str  # exported by B for the whole module

    def image(self, paths: Paths, disk: str) -> Path:
        """The disk's raw file on that node (made, zeroed, if missing)."""
        path = paths.root / f"{disk}.img"
        if not path.exists():
            with path.open("wb") as out:
                out.truncate(SIZE)
        return path


def _node(
    root: Path, ca: tuple[bytes, bytes], name: str, signer: tuple[bytes, bytes] | None = None
) -> Paths:
    paths = Paths(root / name)
    signer = signer or ca
    # QEMU checks its own certificate too: a foreign signer is trusted here.
    write_pem(paths.ca_cert, *dict.fromkeys((ca[0], signer[0])), private=False)
    write_node_cert(paths, signer[0], signer[1], f"{name}.example.com", HOST)
    return paths


@pytest.fixture(scope="module")
def bed() -> Iterator[Bed]:
    # Not tmp_path: the QMP sockets' paths must stay under 108 bytes.
    root = Path(tempfile.mkdtemp(prefix="qsd", dir="/tmp"))
    cluster, other = make_ca("qsd-cluster", 2), make_ca("qsd-other", 2)
    made = Bed(
        _node(root, cluster, "a"),
        _node(root, cluster, "b"),
        _node(root, other, "c"),
        _node(root, cluster, "d", signer=other),
        free_port(HOST),
        str(uuid.uuid4()),
    )
    image = made.image(made.b, made.disk)
    asyncio.run(qsd.start_nbd_export(made.b, made.disk, image, HOST, made.port))
    try:
        yield made
    finally:
        for paths in (made.a, made.b, made.c, made.d):
            for role in qsd.ROLES:
                for pid_file in qsd.mirror_dir(paths).glob(f"*.{role}.pid"):
                    disk = pid_file.name.split(".")[0]
                    asyncio.run(qsd.stop(paths, disk, role))
        shutil.rmtree(root, ignore_errors=True)


def _qemu_io(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["qemu-io", *args], capture_output=True, text=True, timeout=30, check=False
    )


def _key_files(bed: Bed) -> list[Path]:
    return [
        path
        for paths in (bed.a, bed.b, bed.c, bed.d)
        if qsd.mirror_dir(paths).exists()
        for path in qsd.mirror_dir(paths).rglob("*key*")
    ]


def _alive(pid: int) -> bool:
    # A zombie (exited, not yet reaped by init) holds no mount, lock or port.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def test_writes_through_the_fuse_export_reach_both_copies(bed: Bed) -> None:
    local, remote = bed.image(bed.a, bed.disk), bed.image(bed.b, bed.disk)
    mountpoint = bed.a.root / "disk0.fuse"
    pid = await qsd.start_fuse_export(bed.a, bed.disk, local, HOST, bed.port, mountpoint)
    assert mountpoint.stat().st_size == SIZE  # the export, not the empty file
    assert qsd.running(bed.a, bed.disk, qsd.ROLE_FUSE) == pid
    assert (qsd.mirror_dir(bed.a).stat().st_mode & 0o777) == 0o700
    data = os.urandom(256 * 1024)
    fd = os.open(mountpoint, os.O_RDWR)
    try:
        assert os.pwrite(fd, data, 1024 * 1024 + 512) == len(data)
        os.fsync(fd)
        assert os.pread(fd, len(data), 1024 * 1024 + 512) == data
    finally:
        os.close(fd)
    assert local.read_bytes() == remote.read_bytes()
    assert local.read_bytes()[1024 * 1024 + 512 :][: len(data)] == data
    # The credentials were removed once q-s-d had loaded them.
    assert _key_files(bed) == []

    # Idempotent: the same daemon.
    again = await qsd.start_fuse_export(bed.a, bed.disk, local, HOST, bed.port, mountpoint)
    assert again == pid
    # While it runs, the image is locked.
    busy = _qemu_io("-f", "raw", "-c", "write 0 4k", str(local))
    assert busy.returncode != 0 and "lock" in busy.stderr

    await qsd.stop(bed.a, bed.disk, qsd.ROLE_FUSE)
    assert not _alive(pid)
    assert not mountpoint.exists()
    assert not qsd.pidfile(bed.a, bed.disk, qsd.ROLE_FUSE).exists()
    assert not qsd.qmp_socket(bed.a, bed.disk, qsd.ROLE_FUSE).exists()
    assert qsd.running(bed.a, bed.disk, qsd.ROLE_FUSE) is None
    await qsd.stop(bed.a, bed.disk, qsd.ROLE_FUSE)  # stopped already: fine
    written = _qemu_io("-f", "raw", "-c", "write 0 4k", str(local))
    assert written.returncode == 0, written.stderr
    assert _key_files(bed) == []


@pytest.mark.parametrize(
    ("node", "says"),
    [
        # C checks B's certificate against its own CA: not B's issuer.
        ("c", "The certificate hasn't got a known issuer"),
        # D trusts B, but B checks D's certificate (verify-peer): refused.
        ("d", "Cannot read from TLS channel"),
    ],
)
async def test_a_node_of_another_cluster_is_refused(bed: Bed, node: str, says: str) -> None:
    paths: Paths = getattr(bed, node)
    image = bed.image(paths, bed.disk)
    mountpoint = paths.root / "disk0.fuse"
    with pytest.raises(errors.OpExecError) as err:
        await qsd.start_fuse_export(paths, bed.disk, image, HOST, bed.port, mountpoint)
    text = str(err.value)
    assert text.startswith(f"Failed to start the FUSE export of disk {bed.disk}: ")
    assert says in text, text
    # Nothing left behind: no daemon, no mountpoint it made, no credentials.
    assert qsd.running(paths, bed.disk, qsd.ROLE_FUSE) is None
    assert not mountpoint.exists()
    assert list(qsd.mirror_dir(paths).iterdir()) == []
    assert bed.image(paths, bed.disk).read_bytes() == bytes(SIZE)


def test_a_client_without_tls_is_refused(bed: Bed) -> None:
    plain = _qemu_io("-f", "raw", "-c", "read 0 4k", f"nbd://{HOST}:{bed.port}/{bed.disk}")
    assert plain.returncode != 0
    assert "TLS" in plain.stderr, plain.stderr
    # The export still serves the cluster's nodes.
    assert asyncio.run(qsd.probe(HOST, bed.port, 5.0))


def test_the_export_listens_on_its_address_only(bed: Bed) -> None:
    # 127.0.0.2 reaches this host too: a listener on all addresses answers.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.2", bed.port), timeout=5).close()


async def test_start_is_idempotent_and_stop_removes_the_daemon(bed: Bed) -> None:
    pid = qsd.running(bed.b, bed.disk, qsd.ROLE_NBD)
    assert pid is not None
    image = bed.image(bed.b, bed.disk)
    assert await qsd.start_nbd_export(bed.b, bed.disk, image, HOST, bed.port) == pid
    with pytest.raises(errors.ProgrammerError):
        await qsd.stop(bed.b, bed.disk, "drbd")
    assert qsd.running(bed.b, bed.disk, qsd.ROLE_NBD) == pid


async def test_probe_sees_a_live_export_a_stopped_one_and_none(bed: Bed) -> None:
    disk, port = str(uuid.uuid4()), free_port(HOST)
    pid = await qsd.start_nbd_export(bed.b, disk, bed.image(bed.b, disk), HOST, port)
    assert await qsd.probe(HOST, port, 5.0)
    assert not await qsd.probe(HOST, free_port(HOST), 5.0)
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        assert not await qsd.probe(HOST, port, 0.3)
        assert time.monotonic() - started < 5.0  # the timeout bounds it
    finally:
        os.kill(pid, signal.SIGCONT)
    assert await qsd.probe(HOST, port, 5.0)
    await qsd.stop(bed.b, disk, qsd.ROLE_NBD)
    wait_until(lambda: not _alive(pid), what="the stopped export's process to be gone")
    assert not await qsd.probe(HOST, port, 5.0)
    assert not qsd.pidfile(bed.b, disk, qsd.ROLE_NBD).exists()
    assert not qsd.qmp_socket(bed.b, disk, qsd.ROLE_NBD).exists()
    assert _key_files(bed) == []


async def test_a_killed_fuse_export_is_cleaned_up_and_starts_again(bed: Bed) -> None:
    local = bed.image(bed.a, bed.disk)
    mountpoint = bed.a.root / "killed disk.fuse"  # mountinfo escapes the space
    pid = await qsd.start_fuse_export(bed.a, bed.disk, local, HOST, bed.port, mountpoint)
    os.kill(pid, signal.SIGKILL)  # a crash: its mount stays, not connected
    wait_until(lambda: not _alive(pid), what="the killed export's process to be gone")
    assert qsd.running(bed.a, bed.disk, qsd.ROLE_FUSE) is None
    with pytest.raises(OSError):
        mountpoint.stat()
    # Starting again over the dead mount works...
    again = await qsd.start_fuse_export(bed.a, bed.disk, local, HOST, bed.port, mountpoint)
    assert again != pid and mountpoint.stat().st_size == SIZE
    os.kill(again, signal.SIGKILL)
    wait_until(lambda: not _alive(again), what="the killed export's process to be gone")
    # ... and stop of a dead one removes its mount, mountpoint and files.
    await qsd.stop(bed.a, bed.disk, qsd.ROLE_FUSE)
    assert not os.path.lexists(mountpoint)
    assert str(mountpoint) not in Path("/proc/self/mounts").read_text().replace("\\040", " ")
    assert list(qsd.mirror_dir(bed.a).iterdir()) == []
