"""gnt-backup export and import of a 1 GiB disk, and an inter-cluster move,
through the product, against a raw TLS pipe between the same two nodeds.

The bed: a cluster of two real nodes (``tests/helpers/multinode.py``: the
master on node1, node2 joined with a token), each on its own 127.x.y.z
address.  One stopped instance on node1 with one file disk of
``--size-mib`` (1,024) MiB filled with non-zero bytes (a random 4 MiB block
repeated: nothing to skip, little for zstd), in the page cache, and no OS
(so no export script: the disk is dumped raw).  Each run, in turn:

* the pipe: ``zero`` → ``discard`` between node1's and node2's noded through
  the node RPCs (as ``bench_impexp_node`` does): the same TLS streams,
  frames and threads without disk, hash or compression; its time is the
  exporter's ``elapsed`` (the importer accepting to its confirmation);
* ``gnt-backup export -n node2`` of the instance: the command's wall time,
  from a fresh ``.venv/bin/gnt-backup`` process (the venv's python) to its
  exit, i.e. everything the user waits for: the job's checks, locks, the
  stream to node2's export directory (direct I/O, fsync), config.ini;
* ``gnt-backup import`` of that export as a new instance on node1 (the
  disk created, the stream from node2, the instance added), then removed
  (not timed);
* the export again with ``--transport-compression zstd`` (node2 stores it plain).

Then two single-node clusters (``tests/helpers/two_clusters.py``: own roots,
addresses, corral-rapi and one domain secret) with the same instance on the
source: per run the source cluster's own ``gnt-backup export`` (to its
node) and Corral's ``move-instance`` (``--keep-source-instance``; the
moved instance is removed from the destination afterwards), both wall
times.  A move needs an OS (move-instance sends the instance's OS to the
destination), so the instance has one whose scripts stream the disk as
Corral's raw dump and restore do: ``dd`` reading 4 MiB blocks (from the page
cache), ``dd`` writing whole 4 MiB blocks with direct I/O; the export and
the move both go through them.  Then the same with the helper's OS
``dumper`` (``dd bs=1M`` buffered writes on import, which cost the
destination's ``dd`` about 2.7 s of CPU per GiB on this bed): shown beside,
no target.

Figures (medians over the runs): pipe time / export time (the export's
throughput as a share of the pipe's; target ≥ 0.80), the same for the
import (≥ 0.80) and the zstd export (no target, shown beside), and move time
/ export time (≤ 1.3).  Where the time goes: per command, the wall time
split into the stream (the job log's "Exporting disk/0" line to its last
"finished" line) and the rest (process start, job queueing, checks,
finalizing).  Ganeti 3.0.2: a 64 MiB export in 6.13 s, import in 6.68 s
(about 10 MB/s).
"""

from __future__ import annotations

import asyncio
import datetime
import os
import secrets
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import REPO_ROOT, Figure, arg_parser, ensure_bytecode, median, write_results
from corral.rpc.calls_impexp import (
    ImpExpOptions,
    export_start,
    impexp_cleanup,
    impexp_status,
    impexp_wait,
    import_start,
)
from tests.helpers.cluster import TestCluster
from tests.helpers.multinode import cluster_with_nodes
from tests.helpers.noded import Noded
from tests.helpers.osdef import make_os
from tests.helpers.two_clusters import OS_NAME, disk_file, move_args, two_clusters

NAME = "backup"
MIB = 1024 * 1024
SIZE_MIB = 1024
NODE1, NODE2 = "node1.example.com", "node2.example.com"
INSTANCE, IMPORTED = "bk1.example.com", "bk2.example.com"
# The move's instance: the destination cluster resolves its name.
MOVED = "localhost"
# The move's OS: its scripts stream the disk as Corral's own raw dump and
# restore do (reads from the page cache, direct writes of whole blocks), so
# that the move measures the transfer; the helper's ``dumper`` OS (buffered
# ``dd`` writes) is measured beside it.
DIRECT_OS = "benchdd"
DIRECT_SCRIPTS = {
    "export": '#!/bin/sh\nexec dd if="$EXPORT_DEVICE" bs=4M status=none\n',
    "import": '#!/bin/sh\nexec dd of="$IMPORT_DEVICE" bs=4M iflag=fullblock oflag=direct'
    " conv=notrunc status=none\n",
}
GNT_BACKUP = REPO_ROOT / ".venv" / "bin" / "gnt-backup"
PYTHON = REPO_ROOT / ".venv" / "bin" / "python"
GANETI_64MIB = "64 MiB: export 6.13 s, import 6.68 s"


def fill(path: Path, size_mib: int) -> None:
    """Non-zero content over the whole disk file, flushed, then read into the
    page cache (the disk of a VM in use)."""
    block = os.urandom(4 * MIB)
    with path.open("r+b") as handle:
        for _ in range(size_mib // 4):
            handle.write(block)
        handle.flush()
        os.fsync(handle.fileno())
    with path.open("rb") as handle:
        while handle.read(4 * MIB):
            pass


def check(result: subprocess.CompletedProcess[str], what: str) -> None:
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed: {result.stderr or result.stdout}")


def gnt(cl: TestCluster, command: str, *args: str) -> None:
    """An untimed ``gnt-<command>`` that must succeed."""
    result = cl.gnt(command, *args, timeout=900)
    if result.rc != 0:
        raise RuntimeError(f"gnt-{command} {' '.join(args)} failed: {result.stderr}")


def timed(cl: TestCluster, argv: list[str]) -> tuple[float, float, float]:
    """Wall seconds of one command in the cluster's root, from a fresh process,
    and the clock (``time.time``) at its start and end."""
    begin, start = time.time(), time.perf_counter()
    result = subprocess.run(argv, env=cl.env, capture_output=True, text=True, check=False)
    elapsed, end = time.perf_counter() - start, time.time()
    check(result, " ".join(argv[1:3]))
    return elapsed, begin, end


def _seconds(stamp: Any) -> float:
    """A job timestamp (Ganeti's [seconds, microseconds]) in seconds."""
    if isinstance(stamp, list | tuple):
        return float(stamp[0]) + float(stamp[1]) / 1e6
    return float(stamp)


# Where a command's time goes, in order: the CLI starting and submitting, the
# job queued, the job before its first stream, the streams (the job log's
# first "Exporting disk/" line to its last "finished sending/receiving data"
# line), the job after them (config.ini, config), the CLI seeing the end.
PHASES = ("cli_start", "queued", "job_before", "stream", "job_after", "cli_end")


def phases(cl: TestCluster, begin: float, end: float) -> dict[str, float]:
    """The phases of the last job, run by a command between ``begin`` and ``end``."""
    with cl.client() as client:
        last = max(int(row[0]) for row in client.query_jobs(None, ["id"]))
        ((oplog, received, started, ended),) = client.query_jobs(
            [last], ["oplog", "received_ts", "start_ts", "end_ts"]
        )
    entries = [(_seconds(e[1]), str(e[3])) for op in oplog for e in op]
    first = min(t for t, line in entries if line.startswith("Exporting disk/"))
    last_end = max(t for t, line in entries if " finished " in line and line.endswith(" data"))
    marks = [begin, _seconds(received), _seconds(started), first, last_end, _seconds(ended), end]
    return {name: marks[i + 1] - marks[i] for i, name in enumerate(PHASES)}


Raw = dict[str, list[float]]


def backup(cl: TestCluster, raw: Raw, case: str, *args: str) -> float:
    """Wall seconds of ``gnt-backup args`` (the venv's script, with its python);
    the time and its phases go to ``raw`` under ``case``."""
    elapsed, begin, end = timed(cl, [str(PYTHON), str(GNT_BACKUP), *args])
    raw[case].append(elapsed)
    for name, seconds in phases(cl, begin, end).items():
        raw.setdefault(f"{case}:{name}", []).append(seconds)
    return elapsed


async def _until_ended(node: Noded, name: str) -> dict[str, Any]:
    """The stream's final status, followed with impexp_wait (no polling)."""
    while True:
        [st] = await node.run(impexp_wait([name], 30))
        assert st is not None, f"{name} unknown"
        if st["exit_status"] is not None:
            if st["exit_status"] != 0:
                raise RuntimeError(f"{name} failed: {st['error_message']}")
            return dict(st)


async def _pipe(src: Noded, dst: Noded, size: int) -> float:
    opts: ImpExpOptions = {
        "compress": "none",
        "magic": "bench-" + secrets.token_hex(4),
        "connect_timeout": 60,
    }
    inst = {"name": "bench-pipe", "disks": []}
    imp = await dst.run(import_start(opts, inst, "disk/0", "discard", {}))
    [st] = await dst.run(impexp_status([imp]))
    assert st is not None
    exp = await src.run(
        export_start(opts, dst.address, st["listen_port"], inst, "disk/0", "zero", {"size": size})
    )
    done = await _until_ended(src, exp)
    await _until_ended(dst, imp)
    for node, name in ((src, exp), (dst, imp)):
        await node.run(impexp_cleanup(name))
    return float(done["elapsed"])


def pipe_seconds(src: Noded, dst: Noded, size_mib: int) -> float:
    """The raw TLS pipe: ``size_mib`` MiB of zeros from ``src`` to ``dst``, dropped."""
    return asyncio.run(_pipe(src, dst, size_mib * MIB))


def local_run(cl: TestCluster, nodes: dict[str, Noded], size_mib: int, raw: Raw) -> None:
    """One run on the two-node cluster: pipe, export, import, zstd export."""
    raw["pipe"].append(pipe_seconds(nodes[NODE1], nodes[NODE2], size_mib))
    backup(cl, raw, "export", "export", "-n", NODE2, INSTANCE)
    backup(
        cl, raw, "import", "import", "-n", NODE1, "-t", "file", "--src-node", NODE2,
        f"--src-dir={INSTANCE}", "--no-nics", "--no-name-check", "--no-ip-check", IMPORTED,
    )  # fmt: skip
    gnt(cl, "instance", "remove", "-f", IMPORTED)
    backup(
        cl, raw, "export_zstd", "export", "--transport-compression", "zstd", "-n", NODE2,
        INSTANCE,
    )  # fmt: skip
    cases = ("pipe", "export", "import", "export_zstd")
    print(
        "local: "
        + ", ".join(f"{c} {raw[c][-1]:.2f} s ({size_mib / raw[c][-1]:.0f} MiB/s)" for c in cases),
        flush=True,
    )


def move_run(src: TestCluster, dest: TestCluster, work: Path, raw: Raw, key: str) -> None:
    """One run between the two clusters: the source's own export, then the move."""
    backup(src, raw, f"{key}_export", "export", "-n", src.node_name, MOVED)
    argv = [str(PYTHON), "-m", "corral.tools.move_instance", *move_args(src, dest, work),
            "--keep-source-instance", src.node_ip, dest.node_ip, MOVED]  # fmt: skip
    raw[key].append(timed(src, argv)[0])
    gnt(dest, "instance", "remove", "-f", MOVED)
    print(
        f"{key}: source's export {raw[f'{key}_export'][-1]:.2f} s, move {raw[key][-1]:.2f} s",
        flush=True,
    )


def measure_local(work: Path, runs: int, size_mib: int, raw: Raw) -> None:
    with cluster_with_nodes(work / "local", (NODE2,)) as (cl, extra):
        nodes = {NODE1: Noded(cl.paths, cl.node_ip, cl.port, NODE1), NODE2: extra[0]}
        gnt(cl, "instance", "add", "-t", "file", f"--disk=0:size={size_mib}m", "--no-install",
            "--no-start", "--no-nics", "--no-name-check", "--no-ip-check", "-n", NODE1,
            INSTANCE)  # fmt: skip
        (disk,) = (cl.paths.file_storage_dir / INSTANCE).glob("*.disk0")
        fill(disk, size_mib)
        for index in range(runs):
            print(f"run {index + 1}", flush=True)
            local_run(cl, nodes, size_mib, raw)


def measure_move(work: Path, runs: int, size_mib: int, raw: Raw) -> None:
    """The moves between two clusters, with each OS in turn (one instance at a time)."""
    with two_clusters(work / "move") as (src, dest):
        for cl in (src, dest):
            make_os(cl.paths, DIRECT_OS, scripts=DIRECT_SCRIPTS)
        for os_name, key in ((DIRECT_OS, "move"), (OS_NAME, "move_dumper")):
            gnt(src, "instance", "add", "-t", "file", f"--disk=0:size={size_mib}m", "-o",
                f"{os_name}+default", "--no-start", "--no-nics", "--no-name-check",
                "--no-ip-check", MOVED)  # fmt: skip
            fill(disk_file(src, MOVED), size_mib)
            for _ in range(runs):
                move_run(src, dest, work, raw, key)
            gnt(src, "instance", "remove", "-f", MOVED)


def figures(raw: Raw, size_mib: int) -> list[Figure]:
    """The ratios per run, and notes on where the time went."""
    pipe = median(raw["pipe"])
    out = []
    for case, target in (("export", 0.80), ("import", 0.80), ("export_zstd", 0.0)):
        figure = Figure(
            f"{case}_vs_pipe",
            f"gnt-backup {case.replace('_', ' ')} of a {size_mib} MiB disk / raw TLS pipe",
            "ratio",
            target,
            "min",
            GANETI_64MIB,
        )
        figure.runs = [p / s for p, s in zip(raw["pipe"], raw[case], strict=True)]
        wall = median(raw[case])
        split = ", ".join(f"{name} {median(raw[f'{case}:{name}']):.3f}" for name in PHASES)
        figure.notes = (
            f"median {size_mib / wall:.0f} MiB/s for the whole command ({wall:.2f} s), the"
            f" pipe {size_mib / pipe:.0f} MiB/s ({pipe:.2f} s); the command's seconds: {split}"
        )
        out.append(figure)
    return [*out, _move_figure(raw, size_mib, "move"), _move_figure(raw, size_mib, "move_dumper")]


def _move_figure(raw: Raw, size_mib: int, key: str) -> Figure:
    direct = key == "move"
    move = Figure(
        f"{key}_vs_export",
        f"move-instance of a {size_mib} MiB disk between two clusters / that source's export"
        + ("" if direct else f" (OS {OS_NAME}, buffered dd import)"),
        "ratio",
        1.3 if direct else 0.0,
        "max" if direct else "min",
        "not measured",
    )
    move.runs = [m / e for m, e in zip(raw[key], raw[f"{key}_export"], strict=True)]
    move.notes = (
        f"median move {median(raw[key]):.2f} s, the source cluster's own export"
        f" {median(raw[f'{key}_export']):.2f} s (stream"
        f" {median(raw[f'{key}_export:stream']):.2f} s, through the OS scripts)"
    )
    return move


def main() -> None:
    parser = arg_parser(__doc__ or NAME)
    parser.add_argument("--size-mib", type=int, default=SIZE_MIB, help="the disk's size")
    args = parser.parse_args()
    ensure_bytecode()
    cases = ("pipe", "export", "import", "export_zstd", "move", "move_export", "move_dumper")
    raw: Raw = {k: [] for k in (*cases, "move_dumper_export")}
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    with tempfile.TemporaryDirectory(prefix=f"corral-bench-{NAME}-") as tmp:
        measure_local(Path(tmp), args.runs, args.size_mib, raw)
        measure_move(Path(tmp), args.runs, args.size_mib, raw)
    for figure in (result := figures(raw, args.size_mib)):
        print(f"{figure.key}: {figure.notes}")
    params = {"size_mib": args.size_mib, "runs": args.runs, "started": started}
    write_results(NAME, result, params, {"seconds": {k: [round(v, 3) for v in vs]
                                                     for k, vs in raw.items()}})  # fmt: skip


if __name__ == "__main__":
    main()
