"""Trivial jobs per second, end to end.

One run: 1,000 jobs of one OP_TEST_DELAY(duration=0) each are submitted with a
single SubmitManyJobs call; the clock starts just before the request is sent
and stops when the client has seen every job finish and verified (QueryJobs)
that all of them succeeded.  Waiting uses WaitForJobChange on the last
unfinished job, never a polling sleep.  The figure is jobs / elapsed seconds.

Every run starts with an empty queue (the previous run's jobs are archived)
on the same cluster, with masterd's default ``max_running_jobs`` (20).  The
server-side rate (from submission to the latest ``end_ts`` stored in the jobs)
is recorded too, to separate masterd's work from the client's.

Target: ≥ 300 jobs/s.  Ganeti 3.0.2 measured 4.3 jobs/s (for 50 jobs).
"""

from __future__ import annotations

import time

from bench.common import (
    Figure,
    arg_parser,
    bench_cluster,
    delay_op,
    median,
    submit_many,
    wait_all_final,
    write_results,
)
from corral import constants as C
from corral.luxi.client import Client

NAME = "job_throughput"
JOBS = 1000


def one_run(client: Client, jobs: int) -> tuple[float, float, float]:
    """``(end-to-end jobs/s, server-side jobs/s, submit seconds)`` of one run."""
    ops = [[delay_op(0)] for _ in range(jobs)]
    start_wall = time.time()
    start = time.perf_counter()
    ids = submit_many(client, ops)
    submitted = time.perf_counter()
    statuses = wait_all_final(client, ids)
    elapsed = time.perf_counter() - start
    if any(s != C.JOB_STATUS_SUCCESS for s in statuses):
        raise RuntimeError("not every job succeeded")
    ends = client.query_jobs(ids, ["end_ts"])
    last_end = max(row[0][0] + row[0][1] / 1e6 for row in ends)
    client.call("AutoArchiveJobs", -1, 600)
    return jobs / elapsed, jobs / (last_end - start_wall), submitted - start


def main() -> None:
    parser = arg_parser(__doc__ or NAME)
    parser.add_argument("--jobs", type=int, default=JOBS, help=f"jobs per run (default {JOBS})")
    args = parser.parse_args()
    e2e = Figure(
        "job_throughput",
        f"Trivial jobs/s, end to end ({args.jobs} jobs, one SubmitManyJobs)",
        "jobs/s",
        300,
        "min",
        "4.3 jobs/s (50 jobs)",
    )
    server_rates: list[float] = []
    submit_times: list[float] = []
    with bench_cluster(NAME) as cluster, cluster.client() as client:
        one_run(client, 50)  # warm-up: imports, SQLite pages, first-use paths
        for run in range(args.runs):
            rate, server_rate, submit_s = one_run(client, args.jobs)
            e2e.runs.append(rate)
            server_rates.append(server_rate)
            submit_times.append(submit_s)
            print(
                f"run {run + 1}: {rate:.1f} jobs/s end to end, {server_rate:.1f} server side,"
                f" SubmitManyJobs {submit_s * 1000:.0f} ms",
                flush=True,
            )
    e2e.notes = (
        f"server side (submission to last end_ts) median {median(server_rates):.1f} jobs/s;"
        f" SubmitManyJobs call median {median(submit_times) * 1000:.0f} ms"
    )
    write_results(
        NAME,
        [e2e],
        {"jobs": args.jobs, "runs": args.runs, "max_running_jobs": C.DEFAULT_MAX_RUNNING_JOBS},
        {"server_side_jobs_per_s": server_rates, "submit_many_seconds": submit_times},
    )


if __name__ == "__main__":
    main()
