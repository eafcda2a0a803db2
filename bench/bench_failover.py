"""Master failover with the stores in etcd, and trivial jobs/s on three candidates.

The cluster: three real nodes on loopback (``tests/helpers/etcd_cluster.py``),
each a master candidate running an etcd member; the master's stores moved
into etcd; masterd leads on one node and stands by on the two others, all
with the default mastership lease (``--lease-ttl``, 8 s).

Figures (medians of ``--runs`` samples):

* trivial jobs/s with the stores in etcd: 1,000 OP_TEST_DELAY(0) jobs in one
  SubmitManyJobs, until every one has succeeded (as ``bench_job_throughput``,
  whose one-node SQLite figure is the baseline, measured in the same run);
* manual failover: ``gnt-cluster master-failover`` run on a standing-by
  candidate, from before its process starts to the first job accepted by the
  new master (the command returns once the new master answers);
* automatic failover: kill -9 of the master's masterd, to the first job a
  standing-by candidate accepts (each candidate is asked in turn, a few times
  a second); the killed masterd is then started again, standing by.

Targets: ≥ 500 jobs/s; manual failover ≤ 2 s; automatic ≤ 12 s.  Ganeti
3.0.2: manual failover only, with up to 30 s waiting for the old master's IP
and no check that the new master's configuration is the freshest.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_job_throughput import one_run
from bench.common import Figure, arg_parser, bench_cluster, delay_op, median, write_results
from corral.luxi.client import Client
from tests.helpers.crash import MASTERD, kill_9
from tests.helpers.etcd_cluster import Bed, etcd_bed, standby_masterd

NAME = "failover"
NAMES = ("node2.example.com", "node3.example.com")
JOBS = 1000
# Seconds a failover may take before the run is given up.
GIVE_UP = 60.0


def leader(bed: Bed) -> str:
    """The node whose masterd answers as the master."""
    for name in (n.name for n in bed.nodes):
        if accepts_job(bed, name):
            return name
    raise RuntimeError("no master answers")


def accepts_job(bed: Bed, name: str) -> bool:
    """Whether node ``name``'s masterd accepts a trivial job now."""
    try:
        with Client(bed.paths(name).master_socket, timeout=5) as client:
            client.call("SubmitJob", [delay_op(0)])
        return True
    except Exception:  # standing by, starting, or gone
        return False


def manual_failover(bed: Bed, target: str) -> float:
    """Seconds from ``gnt-cluster master-failover`` on ``target`` to its first job."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "corral.cli.gnt_cluster", "master-failover"],
        env=bed.node(target).env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"master-failover on {target} failed: {proc.stderr}")
    if not accepts_job(bed, target):
        raise RuntimeError(f"{target} accepts no job after master-failover")
    return time.perf_counter() - start


def automatic_failover(bed: Bed) -> tuple[float, str]:
    """Seconds from kill -9 of the master's masterd to a job accepted by
    another candidate, and that candidate."""
    dead = leader(bed)
    others = [n.name for n in bed.nodes if n.name != dead]
    start = time.perf_counter()
    kill_9(bed.paths(dead).run_dir / f"{MASTERD}.pid")
    while time.perf_counter() - start < GIVE_UP:
        for name in others:
            if accepts_job(bed, name):
                elapsed = time.perf_counter() - start
                standby_masterd(bed, dead)
                return elapsed, name
        time.sleep(0.1)
    raise RuntimeError(f"no candidate took over within {GIVE_UP:g} s")


def throughput(client: Client, runs: int) -> list[float]:
    one_run(client, 50)  # warm-up
    return [one_run(client, JOBS)[0] for _ in range(runs)]


def main() -> None:
    args = arg_parser(__doc__ or NAME).parse_args()
    etcd_rate = Figure(
        "jobs_per_s_etcd",
        f"Trivial jobs/s with the stores in etcd on 3 candidates ({JOBS} jobs)",
        "jobs/s",
        500,
        "min",
        "4.3 jobs/s (50 jobs, one node)",
    )
    manual = Figure(
        "manual_failover_s",
        "gnt-cluster master-failover to the first job accepted by the new master",
        "s",
        2.0,
        "max",
        "manual only: up to 30 s waiting for the old master's IP, no freshness check",
    )
    automatic = Figure(
        "automatic_failover_s",
        "kill -9 of the master's masterd to the first job accepted by another candidate",
        "s",
        12.0,
        "max",
        "none: no automatic failover",
    )
    with bench_cluster(NAME) as cluster, cluster.client() as client:
        sqlite_rates = throughput(client, args.runs)
    takers: list[str] = []
    with (
        tempfile.TemporaryDirectory(prefix=f"corral-bench-{NAME}-") as tmp,
        etcd_bed(Path(tmp), NAMES) as bed,
    ):
        with Client(bed.cl.paths.master_socket) as client:
            etcd_rate.runs = throughput(client, args.runs)
        for _ in range(args.runs):
            names = [n.name for n in bed.nodes]
            target = names[(names.index(leader(bed)) + 1) % len(names)]
            manual.runs.append(manual_failover(bed, target))
            elapsed, taker = automatic_failover(bed)
            automatic.runs.append(elapsed)
            takers.append(taker)
            print(
                f"manual {manual.runs[-1]:.2f} s, automatic {elapsed:.2f} s ({taker})",
                flush=True,
            )
    etcd_rate.notes = (
        f"one-node SQLite in the same run: median {median(sqlite_rates):.0f} jobs/s;"
        f" etcd/SQLite {etcd_rate.median / median(sqlite_rates):.2f}"
    )
    automatic.notes = f"lease 8 s (masterd's default --lease-ttl); taken by {', '.join(takers)}"
    write_results(
        NAME,
        [etcd_rate, manual, automatic],
        {"jobs": JOBS, "runs": args.runs, "candidates": 3},
        {"sqlite_jobs_per_s": sqlite_rates},
    )


if __name__ == "__main__":
    main()
