"""masterd's CPU per scrape of the metrics endpoint, with 10,000 jobs in the queue.

Set-up: a one-node cluster; 10,000 OP_TEST_DELAY(duration=0) jobs run to the
end in batches of 2,500 (``bench.common.fill_queue``) and left unarchived, so
every one of them is counted by the metrics.

One run: ``--scrapes`` GETs of ``/metrics`` on the node's mond (TCP 1815;
on the master noded asks masterd over luxi with ``CorralMetrics`` and
masterd renders the text), one after the other, each on a new connection,
timed by wall clock; masterd's CPU over them is the growth of utime + stime
in ``/proc/<pid>/stat``.  Then as long again with no scrape: masterd's idle
CPU over the same wall time (its timers, the journal), subtracted.  The
figure is ``(CPU during the scrapes - idle CPU) / scrapes`` in ms.  noded's
CPU per scrape (the HTTP side and the luxi call) is shown beside, with no
target, the same way.

The same runs are made before the queue is filled (the cluster-init job
only): the baseline, which shows that a scrape's cost does not grow with
the queue.  Each figure is the median of ``--runs`` runs.

Target: ≤ 5 ms of masterd's CPU per scrape with 10,000 jobs (issue 27).
Ganeti 3.0.2 has no such endpoint.
"""

from __future__ import annotations

import os
import time
import urllib.request
from pathlib import Path

from bench.common import (
    PYTHON,
    Figure,
    arg_parser,
    bench_cluster,
    fill_queue,
    median,
    write_results,
)
from corral import constants as C
from tests.helpers.cluster import TestCluster

NAME = "metrics"
QUEUED_JOBS = 10_000
SCRAPES = 200
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def cpu_ms(pid: int) -> float:
    """utime + stime of process ``pid`` in ms (fields 14 and 15 of its stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) * TICK_MS


def pid_of(cluster: TestCluster, daemon: str) -> int:
    return int(cluster.paths.pid_file(daemon).read_text().strip())


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as answer:
        if answer.status != 200:
            raise RuntimeError(f"/metrics answered {answer.status}")
        return str(answer.read().decode())


def one_run(cluster: TestCluster, scrapes: int) -> tuple[float, float]:
    """(masterd's, noded's) CPU ms per scrape, idle CPU over the same time removed."""
    url = f"http://{cluster.node_ip}:{C.DEFAULT_MOND_PORT}/metrics"
    pids = pid_of(cluster, "corral-masterd"), pid_of(cluster, "corral-noded")
    before = [cpu_ms(pid) for pid in pids]
    start = time.monotonic()
    for _ in range(scrapes):
        scrape(url)
    wall = time.monotonic() - start
    during = [cpu_ms(pid) - b for pid, b in zip(pids, before, strict=True)]
    before = [cpu_ms(pid) for pid in pids]
    time.sleep(wall)  # the idle window: as long as the scrapes took
    idle = [cpu_ms(pid) - b for pid, b in zip(pids, before, strict=True)]
    master, node = ((d - i) / scrapes for d, i in zip(during, idle, strict=True))
    return master, node


def measure(cluster: TestCluster, runs: int, scrapes: int, label: str) -> list[list[float]]:
    """``runs`` runs: [masterd's figures, noded's figures]."""
    scrape(f"http://{cluster.node_ip}:{C.DEFAULT_MOND_PORT}/metrics")  # warm-up
    master, node = [], []
    for _ in range(runs):
        m, n = one_run(cluster, scrapes)
        master.append(m)
        node.append(n)
        print(f"{label}: masterd {m:.3f} ms, noded {n:.3f} ms per scrape", flush=True)
    return [master, node]


def check_counted(cluster: TestCluster, jobs: int) -> None:
    """The endpoint counts every job (else the figure would measure less)."""
    text = scrape(f"http://{cluster.node_ip}:{C.DEFAULT_MOND_PORT}/metrics")
    counted = sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("corral_jobs_by_status{")
    )
    if counted != jobs:
        raise RuntimeError(f"the metrics count {counted} jobs, the queue has {jobs}")


def main() -> None:
    parser = arg_parser(__doc__ or NAME, runs=5)
    parser.add_argument("--jobs", type=int, default=QUEUED_JOBS, help="jobs in the queue")
    parser.add_argument("--scrapes", type=int, default=SCRAPES, help="scrapes per run")
    args = parser.parse_args()
    title = f"masterd CPU per /metrics scrape, {args.jobs} jobs"
    figure = Figure("metrics_scrape_cpu", title, "ms", 5, "max", "no such endpoint")
    baseline = Figure("metrics_scrape_cpu_empty", "the same, 1 job (baseline)", "ms", 5, "max", "-")
    with bench_cluster(NAME) as cluster, cluster.client() as client:
        baseline.runs = measure(cluster, args.runs, args.scrapes, "1 job")[0]
        start = time.perf_counter()
        existing = len(client.query_jobs(None, ["id"]))
        fill_queue(client, args.jobs - existing)
        print(f"{args.jobs} jobs run in {time.perf_counter() - start:.1f} s", flush=True)
        check_counted(cluster, args.jobs)
        figure.runs, noded = measure(cluster, args.runs, args.scrapes, f"{args.jobs} jobs")
    figure.notes = (
        f"{args.scrapes} sequential scrapes per run, each on a new connection; minus masterd's"
        " idle CPU over the same wall time; /proc/<pid>/stat ticks"
    )
    beside = {"runs": [round(r, 3) for r in noded], "median": round(median(noded), 3)}
    print(f"noded CPU per scrape (no target): median {beside['median']} ms", flush=True)
    write_results(
        NAME,
        [figure, baseline],
        {"jobs_in_queue": args.jobs, "scrapes": args.scrapes, "runs": args.runs, "python": PYTHON},
        {"noded_cpu_ms_per_scrape": beside},
    )


if __name__ == "__main__":
    main()
