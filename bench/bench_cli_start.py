"""How fast a ``gnt-*`` command starts: ``gnt-job list`` against a bare
interpreter start of the same venv, measured in one run (issue 21).

One sample pair, taken alternately so both see the same load: the venv's
python started with ``-c pass`` (the floor: interpreter and ``site``), and
the venv's ``gnt-job list`` script, the command an operator runs, against a
running single-node cluster with 10 finished jobs, from the fork to its exit
(imports, the luxi round trip, masterd's query, the table).  The figure is
the ratio of the medians.  (The other benches time ``python -m
corral.cli.gnt_job``, which ``bench.compare`` can run at any revision; runpy
adds some 6 ms to it.)

Target: at most 2.5 times (at 200d382: 96 ms against 24.5 ms, 3.9 times).  Ganeti 3.0.2's
``gnt-job list``: 0.21 s.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from bench.common import (
    PYTHON,
    Figure,
    arg_parser,
    bench_cluster,
    delay_op,
    ensure_bytecode,
    median,
    submit_many,
    wait_all_final,
    write_results,
)
from tests.helpers.cluster import TestCluster

NAME = "cli_start"


def bare() -> float:
    start = time.perf_counter()
    subprocess.run([PYTHON, "-c", "pass"], check=True)
    return time.perf_counter() - start


def job_list(cluster: TestCluster) -> float:
    """Seconds the venv's ``gnt-job list`` takes, from the fork to its exit."""
    start = time.perf_counter()
    subprocess.run(
        [str(Path(PYTHON).parent / "gnt-job"), "list"],
        env=cluster.env,
        stdout=subprocess.DEVNULL,
        check=True,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = arg_parser(__doc__ or NAME, runs=40)
    args = parser.parse_args()
    ensure_bytecode()
    with bench_cluster(NAME) as cluster:
        with cluster.client() as client:
            wait_all_final(client, submit_many(client, [[delay_op(0.0)]] * 10))
        job_list(cluster)  # warm-up: the page cache
        floor, listing = [], []
        for _ in range(args.runs):
            floor.append(bare() * 1000)
            listing.append(job_list(cluster) * 1000)
    ratio = Figure(
        "job_list_vs_bare", "gnt-job list / bare interpreter start", "x", 2.5, "max", "0.21 s"
    )
    ratio.runs = [median(listing) / median(floor)]
    ratio.notes = f"medians {median(listing):.1f} ms against {median(floor):.1f} ms"
    shown = []
    for key, title, runs in (
        ("bare_ms", "python -c pass (the floor)", floor),
        ("job_list_ms", "gnt-job list, 10 jobs", listing),
    ):
        figure = Figure(key, title, "ms", 0, "min", "0.21 s" if key == "job_list_ms" else "")
        figure.runs = runs
        shown.append(figure)
    write_results(NAME, [ratio, *shown], {"runs": args.runs})


if __name__ == "__main__":
    main()
