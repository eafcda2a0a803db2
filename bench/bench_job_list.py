"""``gnt-job list`` wall clock from a fresh process, with 10,000 jobs in the queue.

Set-up: 10,000 OP_TEST_DELAY(duration=0) jobs are run to the end in batches
of 2,500 (masterd refuses more than 5,000 *unfinished* jobs) and left in the
queue, not archived, so ``gnt-job list`` lists all of them.

One sample: ``<venv>/bin/python -m corral.cli.gnt_job list`` started as a new
process (``subprocess.run``, stdout to /dev/null), timed from just before the
fork to its exit; it prints the default fields (id, status, summary) of all
10,000 jobs.  Everything the command costs is in the figure: interpreter
start-up, imports, the luxi round trip, masterd's query and the formatting.

Two figures, each the median of ``--runs`` samples (after one discarded
warm-up sample that fills the page cache):

* idle: nothing running;
* busy: 15 OP_TEST_DELAY(duration=60) jobs running on masterd (the benchmark
  checks that all 15 are ``running`` before timing, and kills them afterwards).

Target: ≤ 80 ms for both.  Ganeti 3.0.2: 0.21 s idle, 0.18 s with 15 jobs.
"""

from __future__ import annotations

import time

from bench.common import (
    PYTHON,
    Figure,
    arg_parser,
    bench_cluster,
    delay_op,
    ensure_bytecode,
    fill_queue,
    submit_many,
    time_gnt,
    wait_all_final,
    write_results,
)
from corral import constants as C
from corral.luxi.client import Client
from tests.helpers.cluster import TestCluster

NAME = "job_list"
QUEUED_JOBS = 10_000
SLOW_JOBS = 15
SLOW_SECONDS = 60.0


def time_list(cluster: TestCluster) -> float:
    return time_gnt(cluster, "job", "list")


def sample(cluster: TestCluster, runs: int) -> list[float]:
    ensure_bytecode()
    time_list(cluster)  # warm-up, discarded
    return [time_list(cluster) * 1000 for _ in range(runs)]


def wait_running(client: Client, job_ids: list[int], timeout: float = 30) -> None:
    """Wait until every job is running (the slow jobs start at once)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = client.query_jobs(job_ids, ["status"])
        if all(r is not None and r[0] == C.JOB_STATUS_RUNNING for r in rows):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"slow jobs not all running: {rows}")
        time.sleep(0.05)


def main() -> None:
    parser = arg_parser(__doc__ or NAME, runs=7)
    parser.add_argument("--jobs", type=int, default=QUEUED_JOBS, help="jobs in the queue")
    args = parser.parse_args()
    idle = Figure(
        "job_list_idle",
        f"gnt-job list, fresh process, {args.jobs} jobs, idle",
        "ms",
        80,
        "max",
        "210 ms",
    )
    busy = Figure(
        "job_list_busy",
        f"gnt-job list, fresh process, {args.jobs} jobs, {SLOW_JOBS} jobs running",
        "ms",
        80,
        "max",
        "180 ms",
    )
    with bench_cluster(NAME) as cluster, cluster.client() as client:
        start = time.perf_counter()
        existing = len(client.query_jobs(None, ["id"]))  # the cluster-init job
        fill_queue(client, args.jobs - existing)
        print(f"{args.jobs} jobs run in {time.perf_counter() - start:.1f} s", flush=True)
        out = cluster.gnt("job", "list", "--no-headers")
        listed = len(out.stdout.splitlines())
        if listed != args.jobs:
            raise RuntimeError(f"gnt-job list shows {listed} jobs, expected {args.jobs}")
        idle.runs = sample(cluster, args.runs)
        print("idle:", " ".join(f"{r:.1f}" for r in idle.runs), flush=True)
        slow = submit_many(client, [[delay_op(SLOW_SECONDS)] for _ in range(SLOW_JOBS)])
        wait_running(client, slow)
        busy.runs = sample(cluster, args.runs)
        print(f"{SLOW_JOBS} running:", " ".join(f"{r:.1f}" for r in busy.runs), flush=True)
        still = client.query_jobs(slow, ["status"])
        if not all(r[0] == C.JOB_STATUS_RUNNING for r in still):
            raise RuntimeError("the slow jobs stopped running during the measurement")
        for job_id in slow:
            client.call("CancelJob", job_id, True)
        wait_all_final(client, slow, timeout=30)
    idle.notes = busy.notes = (
        "Corral's modules precompiled to __pycache__ first, as in an installed package"
    )
    write_results(
        NAME,
        [idle, busy],
        {
            "jobs_in_queue": args.jobs,
            "slow_jobs": SLOW_JOBS,
            "slow_job_seconds": SLOW_SECONDS,
            "runs": args.runs,
            "python": PYTHON,
        },
    )


if __name__ == "__main__":
    main()
