"""The mirrored template's block-layer costs (issue 26), against a ``file``
disk measured in the same run, on the same host disk.

Two node roots under one cluster CA on loopback: node B exports its copy
over NBD (Corral's ``qemu-storage-daemon`` export, as a secondary runs it);
node A writes through Corral's quorum graph (vote threshold two: its own
copy and B's), the graph a mirrored guest's QEMU opens.

- 4 KiB QD1 writes (``cache=none``, threaded AIO: Ganeti's default
  ``disk_aio``, and what the quorum's local copy uses), quorum / file, with
  ``qemu-img bench`` (target at most 2x); the same with a flush after each
  write (target at most 2.5x).  QEMU 7.2's ``qemu-img bench`` cannot load
  TLS credentials (it has no ``--object``), so these run on an export
  without TLS; what TLS adds is measured beside:
- the TLS share: the same writes through ``qemu-io`` (which loads them), the
  quorum over the TLS export against the quorum over the plain one, each
  figure the time N more writes add (start-up and connecting cancel);
- a full resync, as ``activate-disks`` runs it for a stopped instance:
  ``qemu-img convert`` of A's copy (random data) to B's TLS export
  (target at least 150 MiB/s);
- the bounds of the two ratios on this machine: the same writes to the
  plain export alone (the link's latency: a quorum write cannot be
  acknowledged sooner), and two write+flush streams at once on two files of
  the one virtual disk (both nodes' copies are on it here);
- an incremental resync, as ``activate-disks`` runs it under a running
  guest: a QEMU holding the quorum started alone (a stand-in for B's copy)
  and the dirty bitmap, N MiB written through it in 64 KiB pieces at random
  places, then Corral's resync (the link to B's TLS export, the bitmap's
  rounds, the pause for the last one, B's copy joined to the quorum) timed
  from its call to its return.  The figure is the time per 10 MiB changed,
  (t(30 MiB) - t(10 MiB)) / 2 (target at most 0.1 s); t(10 MiB), which
  includes the link's set-up (NBD over TLS), is beside.

    .venv/bin/python -m bench.bench_mirrored --runs 5
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from qemu.qmp import ConnectError, QMPClient

from bench.common import Figure, arg_parser, median, write_results
from corral.crypto.certs import make_ca, write_node_cert, write_pem
from corral.node import qemu_tls
from corral.node.hypervisor.kvm import mirror_resync
from corral.node.hypervisor.kvm.guest_mirrors import RESYNC_BITMAP
from corral.node.hypervisor.kvm.guest_mirrors import Link as GuestLink
from corral.node.storage import mirror_copy, qsd
from corral.node.storage.mirrored import Link
from corral.paths import Paths
from tests.helpers.noded import free_port

HOST = "127.0.0.1"
MIB = 1024 * 1024
IMAGE_MIB = 256
WRITES = 4000
FLUSHED_WRITES = 2000
IO_WRITES = 2000
# Both sides' I/O as a guest's disks with Ganeti's default disk_aio (kvm's
# file disks, and the local copy in Corral's quorum graph): a thread pool.
AIO = "threads"


@dataclass
class Pair:
    """Node A (the primary: its copy), node B (the secondary: its export)."""

    a: Paths
    b: Paths
    disk: str
    port: int
    mine: Path
    theirs: Path


def _node(root: Path, ca: tuple[bytes, bytes], name: str) -> Paths:
    paths = Paths(root / name)
    write_pem(paths.ca_cert, ca[0], private=False)
    write_node_cert(paths, ca[0], ca[1], f"{name}.example.com", HOST)
    return paths


@contextmanager
def pair() -> Iterator[Pair]:
    # Not /tmp (it may be a tmpfs, where a flush costs nothing): the disk
    # the nodes' storage would be on.
    root = Path(tempfile.mkdtemp(prefix="benchmir", dir="/var/tmp"))
    ca = make_ca("bench-mirrored", 2)
    a, b = _node(root, ca, "a"), _node(root, ca, "b")
    disk = str(uuid.uuid4())
    mine, theirs = root / "a.img", root / "b.img"
    for path in (mine, theirs):
        with path.open("wb") as out:
            out.truncate(IMAGE_MIB * MIB)
    port = free_port(HOST)
    asyncio.run(qsd.start_nbd_export(b, disk, theirs, HOST, port))
    try:
        yield Pair(a, b, disk, port, mine, theirs)
    finally:
        asyncio.run(qsd.stop(b, disk, qsd.ROLE_NBD))
        shutil.rmtree(root, ignore_errors=True)


def _quorum(p: Pair, port: int, creds: Path | None) -> tuple[list[str], str]:
    """qemu-img's --object options and image of the quorum over A's copy and
    the export on ``port`` (TLS if ``creds``)."""
    graph = qsd.quorum_blockdev(p.mine, HOST, port, p.disk, qsd.CREDS_ID, "b.example.com")
    graph["children"][0]["cache"] = {"direct": True}  # as the file's (cache=none)
    objects: list[str] = []
    if creds is None:
        del graph["children"][1]["tls-creds"], graph["children"][1]["tls-hostname"]
    else:
        option = qemu_tls.object_option(qsd.CREDS_ID, str(creds), qemu_tls.ENDPOINT_CLIENT)
        objects = ["--object", option]
    return objects, "json:" + json.dumps(graph)


def _run_io(objects: list[str], image: str, ops: int, flush: bool) -> float:
    """Seconds ``qemu-io`` takes for ``ops`` 4 KiB writes, one at a time
    (each followed by a flush if ``flush``), start-up included."""
    argv = ["qemu-io", *objects]
    argv += [] if image.startswith("json:") else ["-f", "raw", "-t", "none", "-n"]
    lines = []
    for index in range(ops):
        lines.append(f"write -q {index % 4096 * 4096} 4k")
        if flush:
            lines.append("flush")
    started = time.monotonic()
    subprocess.run(
        [*argv, image], input="\n".join(lines) + "\n", text=True, check=True,
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return time.monotonic() - started


def _io_per_write(objects: list[str], image: str, count: int) -> float:
    """Seconds per 4 KiB write through ``qemu-io``: the time ``count`` more
    writes add (start-up and connecting cancel)."""
    more = _run_io(objects, image, 2 * count, False)
    return (more - _run_io(objects, image, count, False)) / count


_COMPLETED = re.compile(r"Run completed in ([0-9.]+) seconds")


def _bench(image: str, count: int, flush: bool) -> float:
    """Seconds per 4 KiB write at QD1 of ``qemu-img bench`` (each followed by
    a flush if ``flush``)."""
    argv = ["qemu-img", "bench", "-w", "-c", str(count), "-d", "1", "-s", "4k"]
    argv += [] if image.startswith("json:") else ["-f", "raw", "-t", "none", "-i", AIO, "-n"]
    argv += ["--flush-interval=1"] if flush else []
    done = subprocess.run([*argv, image], capture_output=True, text=True, check=True)
    found = _COMPLETED.search(done.stdout)
    assert found is not None, done.stdout
    return float(found.group(1)) / count


def _nbd_alone(p: Pair, port: int) -> str:
    """The plain export as an image of its own: the link's latency alone."""
    server = {"type": "inet", "host": HOST, "port": str(port)}
    return "json:" + json.dumps({"driver": "nbd", "server": server, "export": p.disk})


def _flushes_side_by_side(root: Path) -> float:
    """Seconds per 4 KiB write+flush of each of two ``qemu-img bench`` run at
    once on two files of the same disk: what a flush costs when the other
    copy's flushes hit the same disk, as both nodes' do on this machine."""
    images = []
    for name in ("side-a.img", "side-b.img"):
        image = root / name
        with image.open("wb") as handle:
            handle.truncate(IMAGE_MIB * MIB)
        images.append(image)
    argv = ["qemu-img", "bench", "-w", "-c", str(FLUSHED_WRITES), "-d", "1", "-s", "4k",
            "-f", "raw", "-t", "none", "-i", AIO, "-n", "--flush-interval=1"]  # fmt: skip
    runs = [subprocess.Popen([*argv, str(i)], stdout=subprocess.PIPE, text=True) for i in images]
    seconds = []
    for run in runs:
        out, _ = run.communicate()
        found = _COMPLETED.search(out)
        assert found is not None and run.returncode == 0, out
        seconds.append(float(found.group(1)) / FLUSHED_WRITES)
    for image in images:
        image.unlink()
    return sum(seconds) / len(seconds)


def _plain_export(p: Pair) -> tuple[int, int]:
    """An NBD export of B's copy without TLS (the comparison's only): its
    pid and port."""
    port = free_port(HOST)
    blockdev = {"driver": "file", "node-name": "disk", "filename": str(p.theirs), "aio": "threads"}
    export = {"type": "nbd", "id": "e", "node-name": "disk", "name": p.disk, "writable": True}
    server = {"addr": {"type": "inet", "host": HOST, "port": str(port)}}
    pidfile = p.b.root / "plain.pid"
    subprocess.run(
        [qsd.QSD, "--blockdev", json.dumps(blockdev), "--nbd-server", json.dumps(server),
         "--export", json.dumps(export), "--pidfile", str(pidfile), "--daemonize"],
        check=True,
    )  # fmt: skip
    return int(pidfile.read_text()), port


def _full_copy(p: Pair) -> float:
    """MiB/s of a stopped instance's full resync (random data)."""
    with p.mine.open("r+b") as out:
        for _ in range(IMAGE_MIB):
            out.write(os.urandom(MIB))
    peer = Link(export=p.disk, host=HOST, port=p.port, peer_name="b.example.com")
    started = time.monotonic()
    asyncio.run(mirror_copy.copy_all(p.a, p.mine, peer, IMAGE_MIB * MIB, lambda *_: None))
    elapsed = time.monotonic() - started
    assert p.theirs.read_bytes()[:MIB] == p.mine.read_bytes()[:MIB]
    return IMAGE_MIB / elapsed


CHANGED_MIB = (10, 30)
PIECE = 64 * 1024


async def _incremental(p: Pair, creds: Path, changed_mib: int) -> float:
    """Seconds of an incremental resync of ``changed_mib`` MiB (see above)."""
    work = Path(tempfile.mkdtemp(prefix="incr", dir=p.a.root))
    graph = qsd.quorum_blockdev(
        p.mine, HOST, p.port, p.disk, qsd.CREDS_ID, "b.example.com", IMAGE_MIB * MIB
    )
    qmp_path, nbd_path = work / "qmp", work / "nbd"
    argv = [
        "qemu-system-x86_64", "-machine", "none", "-nodefaults", "-display", "none",
        "-qmp", f"unix:{qmp_path},server=on,wait=off",
        "-object", qemu_tls.object_option(qsd.CREDS_ID, str(creds), qemu_tls.ENDPOINT_CLIENT),
        "-blockdev", json.dumps(graph),
    ]  # fmt: skip
    qemu = subprocess.Popen(argv)
    client = QMPClient("bench")
    try:
        await _connect(client, qmp_path)
        quorum = str(graph["node-name"])
        local = str(graph["children"][0]["node-name"])
        await client.execute("block-dirty-bitmap-add", {"node": local, "name": RESYNC_BITMAP})
        await client.execute(
            "nbd-server-start", {"addr": {"type": "unix", "data": {"path": str(nbd_path)}}}
        )
        export = {"type": "nbd", "id": "w", "node-name": quorum, "name": "w", "writable": True}
        await client.execute("block-export-add", export)
        pieces = random.sample(range(IMAGE_MIB * MIB // PIECE), changed_mib * MIB // PIECE)
        lines = [f"write -q -P {i % 250 + 1} {piece * PIECE} 64k" for i, piece in enumerate(pieces)]
        subprocess.run(
            ["qemu-io", "-f", "raw", f"nbd+unix:///w?socket={nbd_path}"],
            input="\n".join(lines) + "\n", text=True, check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        await client.execute("block-export-del", {"id": "w"})
        await client.execute("nbd-server-stop")
        link = GuestLink(quorum, p.disk, HOST, p.port)
        started = time.monotonic()
        await mirror_resync.resync(client, link, "b.example.com", lambda *_: None)
        elapsed = time.monotonic() - started
        await client.execute("quit")
    finally:
        await client.disconnect()
        qemu.wait(30)
        shutil.rmtree(work, ignore_errors=True)
    with p.mine.open("rb") as mine, p.theirs.open("rb") as theirs:
        for piece in pieces:
            mine.seek(piece * PIECE)
            theirs.seek(piece * PIECE)
            assert mine.read(PIECE) == theirs.read(PIECE), "the resync missed a change"
    return elapsed


async def _connect(client: QMPClient, path: Path) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            await client.connect(str(path))
            return
        except (ConnectError, OSError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


def main() -> None:
    args = arg_parser(__doc__ or "").parse_args()
    write = Figure("write_ratio", "4 KiB QD1 write, mirrored / file", "x", 2.0, "max", "n/a (DRBD)")
    flushed = Figure(
        "write_flush_ratio", "4 KiB QD1 write+flush, mirrored / file", "x", 2.5, "max", "n/a"
    )
    copy = Figure("full_resync", "Full resync (stopped instance)", "MiB/s", 150, "min", "n/a")
    incremental = Figure(
        "incremental_resync", "Incremental resync per 10 MiB changed (running)", "s", 0.1, "max",
        "n/a",
    )  # fmt: skip
    first_10: list[float] = []  # with the link's set-up (informational)
    keys = ("file", "file_flush", "quorum", "quorum_flush", "io_tls", "io_plain", "nbd",
            "nbd_flush", "flush_side_by_side")  # fmt: skip
    samples: dict[str, list[float]] = {k: [] for k in keys}
    tls_share: list[float] = []  # what TLS adds to a write (informational)
    with pair() as p:
        creds_dir = Path(tempfile.mkdtemp(prefix="creds", dir=p.a.root))
        qemu_tls.write_creds(p.a, creds_dir / "c", qemu_tls.ENDPOINT_CLIENT)
        tls = _quorum(p, p.port, creds_dir / "c")
        plain_pid, plain_port = _plain_export(p)
        plain = _quorum(p, plain_port, None)
        try:
            for _ in range(args.runs):
                run = {
                    "file": _bench(str(p.mine), WRITES, False),
                    "file_flush": _bench(str(p.mine), FLUSHED_WRITES, True),
                    "quorum": _bench(plain[1], WRITES, False),
                    "quorum_flush": _bench(plain[1], FLUSHED_WRITES, True),
                    "io_tls": _io_per_write(*tls, IO_WRITES),
                    "io_plain": _io_per_write(*plain, IO_WRITES),
                    # The bounds: the link alone, and two copies' flushes on one disk.
                    "nbd": _bench(_nbd_alone(p, plain_port), WRITES, False),
                    "nbd_flush": _bench(_nbd_alone(p, plain_port), FLUSHED_WRITES, True),
                    "flush_side_by_side": _flushes_side_by_side(p.a.root),
                }
                for key, value in run.items():
                    samples[key].append(value)
                write.runs.append(run["quorum"] / run["file"])
                flushed.runs.append(run["quorum_flush"] / run["file_flush"])
                tls_share.append(run["io_tls"] / run["io_plain"])
                copy.runs.append(_full_copy(p))
                small, large = (
                    asyncio.run(_incremental(p, creds_dir / "c", n)) for n in CHANGED_MIB
                )
                first_10.append(small)
                incremental.runs.append((large - small) / 2)
        finally:
            os.kill(plain_pid, 15)
    extra = {k: [round(v * 1e6, 1) for v in vs] for k, vs in samples.items()}
    medians = {f"{k}_median_us": round(median(vs) * 1e6, 1) for k, vs in samples.items()}
    medians["tls_over_plain_median"] = round(median(tls_share), 3)
    medians["incremental_10_mib_with_link_median_s"] = round(median(first_10), 3)
    # The least each ratio can be here: a write is acknowledged once the link
    # (and, flushed, the slower of the two flushes on the one disk) has it.
    file_us, flush_us = median(samples["file"]), median(samples["file_flush"])
    medians["write_bound_nbd_over_file"] = round(median(samples["nbd"]) / file_us, 3)
    medians["flush_bound_nbd_over_file"] = round(median(samples["nbd_flush"]) / flush_us, 3)
    medians["flush_bound_side_by_side_over_file"] = round(
        median(samples["flush_side_by_side"]) / flush_us, 3
    )
    write_results(
        "mirrored",
        [write, flushed, copy, incremental],
        {"runs": args.runs, "writes": WRITES, "flushed_writes": FLUSHED_WRITES,
         "io_writes": IO_WRITES, "image_mib": IMAGE_MIB, "changed_mib": list(CHANGED_MIB)},
        {"latency_us": extra, "tls_over_plain": [round(r, 3) for r in tls_share],
         "incremental_10_mib_with_link_s": [round(t, 3) for t in first_10], **medians},
    )  # fmt: skip
    for key, value in medians.items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
