"""A 1 GiB sparse OS image written onto a disk by a real ``corral-noded``
(the ``blockdev_image`` call of ``gnt-instance add/reinstall`` with
``os-image``), against ``cp --sparse=always`` of the same file in the same run.

The image: 1,024 MiB of which ``--data-mib`` (160) MiB are random data in a
few extents, the rest holes, in the page cache (read just before).  Each run,
in turn:

* the baseline: ``cp --sparse=always`` of the image onto the previous run's
  copy in the same file system, then ``sync -d`` of the copy: an installed
  disk must be on the disk, and the node's write ends with fsync (the table
  also shows cp alone);
* the install: ``blockdev_image`` of the image onto the instance's 1 GiB file
  disk (which held the previous run's data), timed from the call to its
  answer, over one RPC client (TLS connection set up once).

Figure: median of baseline time / install time (target ≥ 0.80, issue 23).
Ganeti 3.0.2 writes images with ``dd bs=1M oflag=direct``: every byte, holes
included.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

from bench.common import Figure, arg_parser, ensure_bytecode, median, write_results
from corral.rpc.calls_osmedia import blockdev_image
from corral.rpc.wire import DiskWire
from tests.helpers.cluster import unique_loopback
from tests.helpers.noded import Noded, make_node_root, running_noded

NAME = "os_image"
MIB = 1024 * 1024
SIZE_MIB = 1024
DATA_MIB = 160
INSTANCE = "image1.example.com"


def make_image(path: Path, size_mib: int, data_mib: int) -> None:
    """A sparse image: ``data_mib`` MiB of random data in four extents."""
    extent = data_mib // 4
    with path.open("wb") as handle:
        handle.truncate(size_mib * MIB)
        for index in range(4):
            handle.seek(index * (size_mib // 4) * MIB)
            for _ in range(extent):
                handle.write(os.urandom(MIB))
        handle.flush()
        os.fsync(handle.fileno())
    with path.open("rb") as handle:  # into the page cache
        while handle.read(4 * MIB):
            pass


def disk_wire(size_mib: int) -> DiskWire:
    return {
        "template": "file",
        "logical_id": ["loop", f"/srv/ganeti/file-storage/{INSTANCE}/disk0"],
        "size": size_mib,
        "uuid": f"{INSTANCE}-0",
        "iv_name": "disk/0",
        "name": None,
        "mode": "rw",
    }


def cp_seconds(image: Path, copy: Path, sync: bool) -> float:
    """``cp --sparse=always`` onto the previous copy (cp truncates it: its old
    extents are freed, as the install frees the disk's)."""
    start = time.perf_counter()
    subprocess.run(["cp", "--sparse=always", str(image), str(copy)], check=True)
    if sync:
        subprocess.run(["sync", "-d", str(copy)], check=True)
    return time.perf_counter() - start


async def measure(
    node: Noded, image: Path, copy: Path, runs: int, size_mib: int
) -> tuple[list[float], list[float], list[float], dict[str, int]]:
    """Each run: cp alone, cp and sync, the install (one RPC client throughout)."""
    cp_only, cp_synced, installs = [], [], []
    written: dict[str, int] = {}
    async with node.client() as rpc:
        for index in range(runs + 1):
            only = cp_seconds(image, copy, sync=False)
            synced = cp_seconds(image, copy, sync=True)
            start = time.perf_counter()
            request = blockdev_image(disk_wire(size_mib), str(image), f"bench-{index}")
            answer = await rpc.run(node.target, request, "blockdev_image")
            written = {"size": answer["size"], "written": answer["written"]}
            seconds = time.perf_counter() - start
            if index:  # the first run warms noded's imports up
                cp_only.append(only)
                cp_synced.append(synced)
                installs.append(seconds)
    return cp_only, cp_synced, installs, written


def main() -> None:
    parser = arg_parser(__doc__ or NAME)
    parser.add_argument("--size-mib", type=int, default=SIZE_MIB)
    parser.add_argument("--data-mib", type=int, default=DATA_MIB)
    parser.add_argument("--work", type=Path, default=Path("/var/tmp"))
    opts = parser.parse_args()
    ensure_bytecode()
    base = opts.work / f"corral-bench-os-image-{os.getpid()}"
    base.mkdir(parents=True)
    try:
        run(base, opts.runs, opts.size_mib, opts.data_mib)
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=True)


def run(base: Path, runs: int, size_mib: int, data_mib: int) -> None:
    address = unique_loopback()
    paths = make_node_root(base / "node", node_ip=address)
    disk = paths.file_storage_dir / INSTANCE / "disk0"
    disk.parent.mkdir(parents=True)
    with disk.open("wb") as handle:
        handle.truncate(size_mib * MIB)
    image = paths.file_storage_dir / "image.raw"  # the disks' file system
    make_image(image, size_mib, data_mib)
    copy = paths.file_storage_dir / "copy.raw"
    with running_noded(paths, address) as node:
        cp_only, cp_synced, installs, written = asyncio.run(
            measure(node, image, copy, runs, size_mib)
        )
    assert disk.stat().st_blocks * 512 < (data_mib + 16) * MIB, "the holes were not kept"
    figure = Figure(
        key="image_vs_cp",
        title=f"{size_mib} MiB sparse image installed vs cp --sparse=always + sync",
        unit="x",
        target=0.8,
        bound="min",
        ganeti="dd of every byte",
        runs=[c / i for c, i in zip(cp_synced, installs, strict=True)],
    )
    plain = Figure(
        key="image_vs_cp_nosync",
        title="the same vs cp --sparse=always alone (no sync)",
        unit="x",
        target=0.0,
        bound="min",
        ganeti="-",
        runs=[c / i for c, i in zip(cp_only, installs, strict=True)],
        notes="information: cp leaves the data in the page cache",
    )
    write_results(
        NAME,
        [figure, plain],
        {"runs": runs, "size_mib": size_mib, "data_mib": data_mib},
        {
            "seconds": {
                "install_median": round(median(installs), 4),
                "cp_sync_median": round(median(cp_synced), 4),
                "cp_median": round(median(cp_only), 4),
            },
            "written": written,
        },
    )


if __name__ == "__main__":
    main()
