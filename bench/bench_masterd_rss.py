"""masterd's resident memory, idle, with 10,000 archived jobs.

One run, on a fresh cluster: 10,000 OP_TEST_DELAY(duration=0) jobs are run to
the end in batches of 2,500 (masterd refuses more than 5,000 unfinished
jobs), each batch archived with AutoArchiveJobs(-1, ...) as it finishes.
Then a few ordinary queries are made (``gnt-job list``, ``gnt-job info`` of
an archived job, ``gnt-cluster info``, QueryJobs, Query of the locks), masterd
is left idle for two seconds, and its ``VmRSS`` is read from
``/proc/<pid>/status``.  The figure is the median over runs.

Recorded alongside: masterd's RSS right after ``gnt-cluster init`` (before any
job), its peak (``VmHWM``) and corral-noded's RSS, which is not part of the
figure (Ganeti's comparable figure is luxid + wconfd, not noded).

Target: ≤ 60 MB.  Ganeti 3.0.2: luxid + wconfd ≈ 53 MB idle.
"""

from __future__ import annotations

import time
from pathlib import Path

from bench.common import (
    Figure,
    arg_parser,
    bench_cluster,
    fill_queue,
    masterd_pid,
    median,
    rss_kib,
    write_results,
)
from corral import constants as C
from corral.luxi.client import Client
from tests.helpers.cluster import TestCluster

NAME = "masterd_rss"
ARCHIVED_JOBS = 10_000


def peak_kib(pid: int) -> int:
    """Peak resident set size (``VmHWM``) in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmHWM for pid {pid}")


def a_few_queries(cluster: TestCluster, client: Client, some_job: int) -> None:
    """What an administrator typically runs on an idle cluster."""
    for command in (("job", "list"), ("job", "info", str(some_job)), ("cluster", "info")):
        result = cluster.gnt(*command)
        if result.rc != 0:
            raise RuntimeError(f"gnt-{' '.join(command)} failed: {result.stderr}")
    client.query_jobs([some_job, some_job + 1], ["id", "status", "summary"])
    client.query(C.QR_LOCK, ["name", "mode", "owner", "pending"])
    client.call("QueryClusterInfo")


def one_run(jobs: int) -> tuple[float, float, float, float]:
    """``(RSS MB, RSS before the jobs MB, peak MB, noded RSS MB)`` of one run."""
    with bench_cluster(NAME) as cluster, cluster.client() as client:
        pid = masterd_pid(cluster)
        noded = int(cluster.paths.pid_file("corral-noded").read_text().strip())
        time.sleep(1)
        before = rss_kib(pid)
        ids = fill_queue(client, jobs, archive=True)
        left = client.query(C.QR_JOB, ["id"])["data"]
        if len(left) > 1:  # only the cluster-init job may be left unarchived
            raise RuntimeError(f"{len(left)} jobs not archived")
        a_few_queries(cluster, client, ids[len(ids) // 2])
        time.sleep(2)
        return (
            rss_kib(pid) / 1024,
            before / 1024,
            peak_kib(pid) / 1024,
            rss_kib(noded) / 1024,
        )


def main() -> None:
    parser = arg_parser(__doc__ or NAME)
    parser.add_argument("--jobs", type=int, default=ARCHIVED_JOBS, help="jobs to archive")
    args = parser.parse_args()
    rss = Figure(
        "masterd_rss",
        f"masterd RSS, idle, {args.jobs} archived jobs",
        "MB",
        60,
        "max",
        "≈ 53 MB (luxid + wconfd)",
    )
    before: list[float] = []
    peak: list[float] = []
    noded: list[float] = []
    for run in range(args.runs):
        value, start, top, node = one_run(args.jobs)
        rss.runs.append(value)
        before.append(start)
        peak.append(top)
        noded.append(node)
        print(
            f"run {run + 1}: masterd {value:.1f} MB (at start {start:.1f}, peak {top:.1f});"
            f" noded {node:.1f} MB",
            flush=True,
        )
    rss.notes = (
        f"masterd at start (no jobs) median {median(before):.1f} MB, peak (VmHWM) median"
        f" {median(peak):.1f} MB; corral-noded median {median(noded):.1f} MB (not counted)"
    )
    write_results(
        NAME,
        [rss],
        {"archived_jobs": args.jobs, "runs": args.runs},
        {"masterd_start_mb": before, "masterd_peak_mb": peak, "noded_mb": noded},
    )


if __name__ == "__main__":
    main()
