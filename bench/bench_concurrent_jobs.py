"""Eight clients at once on overlapping instance names, for a minute (issue 20).

One run: a fresh single-node cluster; eight clients, each with its own luxi
connection, submit one job at a time for ``--seconds`` (60): add (a 1 MiB
file disk, started or not), remove, rename, modify (memory), add a tag,
start, stop, on six shared names (``tests/helpers/workload.py``).  Then the
successful jobs are replayed in the order their opcodes began executing
(under their locks) and the result is compared with the cluster: every
acknowledged change must be there, no successful job may have acted on a
name that did not exist then, no job may fail with anything but a refusal
(OpPrereqError), and ``gnt-cluster verify`` must be clean.

Figures: problems found (lost or misplaced updates, internal errors, verify
findings) per run, target 0; jobs per second shown beside.  On commit
200d382 (before the fix) the same three runs found 151, 225 and 84 problems
(jobs acting on names that no longer meant their instance, acknowledged
changes lost, 1 to 2 internal ConfigurationErrors and 8 to 10 OpExecErrors
per run).  Ganeti 3.0.2 refuses such jobs ("Maybe the instance changed since
you submitted this job"); its rate was not measured.
"""

from __future__ import annotations

from typing import Any

from bench.common import Figure, arg_parser, bench_cluster, median, write_results
from tests.helpers.workload import run_workload

NAME = "concurrent_jobs"


def main() -> None:
    parser = arg_parser(__doc__ or NAME, runs=3)
    parser.add_argument("--seconds", type=float, default=60.0, help="length of a run")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients")
    args = parser.parse_args()
    problems = Figure(
        "workload_problems",
        f"Lost/misplaced updates, internal errors, verify findings ({args.clients} clients,"
        f" {args.seconds:g} s)",
        "problems",
        0,
        "max",
        "refuses such jobs (not measured)",
    )
    rate = Figure("workload_jobs_per_s", "Jobs of the workload per second", "jobs/s", 0, "min", "-")
    details: list[dict[str, Any]] = []
    for run in range(args.runs):
        with bench_cluster(f"{NAME}-{run}") as cluster:
            report = run_workload(
                cluster,
                clients=args.clients,
                ops_per_client=10**9,
                seconds=args.seconds,
                seed=run + 1,
            )
        found = report.problems()
        problems.runs.append(len(found))
        rate.runs.append(len(report.done) / report.seconds)
        errors = dict(report.errors())
        details.append(
            {
                "jobs": len(report.done),
                "succeeded": report.succeeded,
                "errors": errors,
                "problems": found[:20],
            }
        )
        print(
            f"run {run + 1}: {len(report.done)} jobs, {report.succeeded} succeeded,"
            f" refused {errors}, {len(found)} problems",
            flush=True,
        )
    problems.notes = f"jobs per run: median {median([d['jobs'] for d in details]):.0f}"
    write_results(
        NAME,
        [problems, rate],
        {"seconds": args.seconds, "clients": args.clients, "runs": args.runs},
        {"runs": details},
    )


if __name__ == "__main__":
    main()
