"""gnt-instance move of a 1 GiB file disk between two nodes, against the
import/export engine's own pipe between the same two node daemons.

The cluster: the usual temporary cluster (``bench/common.py``) plus a second
real ``corral-noded`` on its own 127.x.y.z address, joined with a token
(``tests/helpers/multinode.py``).  One stopped instance with one file disk of
``--size-mib`` (1,024) MiB, filled with non-zero bytes (a random 4 MiB block
repeated: the copy is not compressed, and no run of zeros may be skipped).

Each run moves the instance twice (node1 → node2, then back), its source disk
first *warm* (read once, so in the page cache, as the disk of a VM in use)
then *cold* (dropped from the cache: the source reads the device).  Both
nodes of this test bed share one disk, so a cold move reads and writes the
same device at once, which two real nodes do not.  Before each move:

* the baseline: the engine's pipe, ``zero`` → ``discard`` from the source's
  noded to the target's through ``import_start``/``export_start`` (as
  ``bench_backup`` measures it): the same TLS 1.3 streams, frames and
  threads as the move's copy, without disk; its time is the exporter's
  ``elapsed``;
* the move: one ``OP_INSTANCE_MOVE`` job submitted over luxi and followed
  (WaitForJobChange) to its end: everything the user waits for, i.e. the
  checks, hooks, the disk created on the target, the stream (an export of
  the disk on the source, an import into the new disk on the target, direct
  I/O, fsync), the configuration committed and the source's disk removed.

Figures: the medians over the runs of baseline time / move time (the move's
throughput as a share of the engine's pipe), warm and cold.  Target: ≥ 0.70.
Ganeti 3.0.2: not measured (its move goes through socat and dd, with a
per-disk daemon).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_backup import pipe_seconds
from bench.common import Figure, arg_parser, ensure_bytecode, median, write_results
from corral import constants as C
from corral.luxi.client import Client
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.multinode import add_node
from tests.helpers.noded import Noded
from tests.helpers.osdef import make_os

NAME = "move"
MIB = 1024 * 1024
SIZE_MIB = 1024
INSTANCE = "move1.example.com"
NODE1, NODE2 = "node1.example.com", "node2.example.com"


def gnt(cluster: TestCluster, command: str, *args: str) -> str:
    result = cluster.gnt(command, *args, timeout=600)
    if result.rc != 0:
        raise RuntimeError(f"gnt-{command} {' '.join(args)} failed: {result.stderr}")
    return result.stdout


def fill(path: Path, size_mib: int) -> None:
    """Non-zero content over the whole disk file, flushed to disk."""
    block = os.urandom(4 * MIB)
    with path.open("r+b") as handle:
        for _ in range(size_mib // 4):
            handle.write(block)
        handle.flush()
        os.fsync(handle.fileno())


def wait_job(client: Client, job_id: int) -> str:
    """Follow the job with WaitForJobChange until it ends; its status.

    The log serial seen is sent back each time (``common.wait_final`` sends 0,
    so a job with log entries answers at once: a busy loop that would take
    CPU from the nodes while they copy)."""
    info: Any = None
    serial = 0
    while True:
        result = client.wait_for_job_change(job_id, ["status"], info, serial, 30)
        if result == "nochange":
            continue
        info = result[0]
        serial = max([serial, *(entry[0] for entry in result[1])])
        if info[0] in C.JOB_STATUS_FINALIZED:
            return str(info[0])


def move_seconds(cluster: TestCluster, target: str) -> float:
    """Seconds from submitting the move job to its successful end."""
    op = {"OP_ID": "OP_INSTANCE_MOVE", "instance_name": INSTANCE, "target_node": target}
    with cluster.client() as client:
        start = time.perf_counter()
        job_id = client.submit_job([op])
        status = wait_job(client, job_id)
        elapsed = time.perf_counter() - start
        if status != C.JOB_STATUS_SUCCESS:
            (row,) = client.query_jobs([job_id], ["opresult"])
            raise RuntimeError(f"move job {job_id} ended {status}: {row}")
    return elapsed


def set_cache(path: Path, warm: bool) -> None:
    """Put the disk file in the page cache (read it once) or drop it from there."""
    with path.open("rb") as handle:
        if warm:
            while handle.read(4 * MIB):
                pass
        else:
            os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def disk_file(nodes: dict[str, Noded], node: str) -> Path:
    (path,) = (nodes[node].paths.file_storage_dir / INSTANCE).glob("*.disk0")
    return path


def measure(cluster: TestCluster, nodes: dict[str, Noded], runs: int, size_mib: int) -> Any:
    """Per run, a warm and a cold move (each after its own baseline), back and forth."""
    figures = {
        cache: Figure(
            f"move_vs_pipe_{cache}",
            f"move of a {size_mib} MiB file disk ({cache} source) / engine pipe",
            "ratio",
            0.70,
            "min",
            "not measured",
        )
        for cache in ("warm", "cold")
    }
    raw: dict[str, list[float]] = {"pipe": [], "move_warm": [], "move_cold": []}
    here, there = NODE1, NODE2
    for index in range(runs):
        for cache, figure in figures.items():
            copy = pipe_seconds(nodes[here], nodes[there], size_mib)
            set_cache(disk_file(nodes, here), cache == "warm")
            move = move_seconds(cluster, there)
            raw["pipe"].append(copy)
            raw[f"move_{cache}"].append(move)
            figure.runs.append(copy / move)
            print(
                f"run {index + 1} ({cache}): {here} -> {there}: pipe"
                f" {size_mib / copy:.1f} MiB/s, move {size_mib / move:.1f} MiB/s,"
                f" ratio {copy / move:.3f}",
                flush=True,
            )
            here, there = there, here
    for cache, figure in figures.items():
        figure.notes = (
            f"median move {size_mib / median(raw[f'move_{cache}']):.1f} MiB/s (whole job),"
            f" median engine pipe {size_mib / median(raw['pipe']):.1f} MiB/s"
        )
    return list(figures.values()), raw


def main() -> None:
    parser = arg_parser(__doc__ or NAME)
    parser.add_argument("--size-mib", type=int, default=SIZE_MIB, help="the disk's size")
    args = parser.parse_args()
    ensure_bytecode()
    with (
        tempfile.TemporaryDirectory(prefix=f"corral-bench-{NAME}-") as tmp,
        running_cluster(Path(tmp) / "node1") as cluster,
    ):
        node2 = add_node(cluster, Path(tmp) / "node2", NODE2)
        try:
            nodes = {NODE1: Noded(cluster.paths, cluster.node_ip, cluster.port, NODE1)}
            nodes[NODE2] = node2
            make_os(cluster.paths, "plain", variants=None)
            gnt(cluster, "instance", "add", "--no-name-check", "--no-ip-check", "-t", "file",
                f"--disk=0:size={args.size_mib}m", "-o", "plain", "--no-install",
                "--no-start", "-n", NODE1, INSTANCE)  # fmt: skip
            (disk,) = (cluster.paths.file_storage_dir / INSTANCE).glob("*.disk0")
            fill(disk, args.size_mib)
            figures, raw = measure(cluster, nodes, args.runs, args.size_mib)
        finally:
            node2.stop()
    params = {"size_mib": args.size_mib, "runs": args.runs}
    write_results(NAME, figures, params, {"seconds": raw})


if __name__ == "__main__":
    main()
