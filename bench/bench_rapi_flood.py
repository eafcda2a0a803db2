"""corral-rapi under 1,000 slow or idle unauthenticated connections (issue 20).

One cluster; each run restarts corral-rapi (a fresh process, so that its
memory owes nothing to the runs before) and measures, in this order:

* *baseline*: legitimate GETs for ``--seconds`` with no hostile client,
  ``RATE`` a second, each on a new TLS connection (handshake included),
  alternately ``GET /2/info`` without credentials and ``GET /2/instances``
  as a write user; a request counts as answered if its 200 came within
  ``TIMEOUT`` s, and its latency is from connecting to the whole answer;
* *burst*: ``BURST`` (500) GETs of ``/2/info`` started at once, each on its
  own connection: how many were answered 200;
* then, for each of two floods: a separate process
  (``tests/helpers/rapi_flood.py``) opens ``--flood`` (1,000) connections
  without credentials, each sending a request body one byte every 5 s
  (*bodies*, the issue's attack), or a quarter of each kind (*mixed*: TCP
  without a handshake, TLS then nothing, a head one byte every 5 s, a body
  one byte every 5 s); every connection the server closes is opened again at
  once.  Once all have been open (or after ``READY_TIMEOUT``), the legitimate
  GETs run again for ``--seconds``: answered share, p99 latency (an
  unanswered request counts as ``TIMEOUT``), corral-rapi's largest RSS
  (sampled 10 times a second) and every process's CPU share over the window;
  the burst again; then SIGTERM to corral-rapi, the flood still on, until the
  process is gone (a pidfd says when), and corral-rapi is started again;
* *renewal*: ``gnt-cluster renew-crypto --new-rapi-certificate --force``
  (which stops corral-rapi, writes the certificate and starts corral-rapi
  again), start to end, with no hostile client and under a fresh flood of
  each kind once all its connections are open: the seconds a flood adds.

Targets (issue 20): ≥ 99 % answered, p99 ≤ 200 ms, RSS ≤ 100 MiB under the
flood; the 500 GETs of a burst all answered; a stop within 1 s, and a
renewal under the flood within 1 s of one without (it took 13.6 s).  The
hostile clients, the legitimate client and the daemons share this machine's
cores: the CPU shares show how much of it each took.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from statistics import median
from typing import Any

from bench.bench_rapi import cpu_seconds
from bench.common import (
    PYTHON,
    REPO_ROOT,
    Figure,
    arg_parser,
    bench_cluster,
    ensure_bytecode,
    percentile,
    rss_kib,
    write_results,
)
from corral.bootstrap import RAPI, start_rapi
from corral.process.daemons import stop_daemon
from tests.helpers.cluster import RAPI_PORT, TestCluster
from tests.helpers.rapi import basic
from tests.helpers.rapi_flood import KINDS, Outcome, Target, burst, paced

NAME = "rapi_flood"
USER, PASSWORD = "bench", "bench-password"
RATE = 20.0
SECONDS = 20.0
TIMEOUT = 5.0
BURST = 500
FLOOD = 1000
PACE = 5.0
READY_TIMEOUT = 120.0
STOP_TIMEOUT = 30.0
RENEW = ("renew-crypto", "--new-rapi-certificate", "--force")


def rapi_pid(cluster: TestCluster) -> int:
    return int(cluster.paths.pid_file(RAPI).read_text().strip())


async def _legitimate(target: Target, seconds: float, sample: Callable[[], None]) -> list[Outcome]:
    """Anonymous and authenticated GETs, alternately (two paced streams)."""
    auth = basic(USER, PASSWORD)
    streams = await asyncio.gather(
        paced(target, "/2/info", None, RATE / 2, seconds, TIMEOUT, sample),
        paced(target, "/2/instances", auth, RATE / 2, seconds, TIMEOUT),
    )
    return [outcome for stream in streams for outcome in stream]


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    """Answered share (%), p50 and p99 latencies (ms, an unanswered one as TIMEOUT)."""
    answered = [o for o in outcomes if o.status == 200]
    latencies = [o.seconds * 1000 if o.status == 200 else TIMEOUT * 1000 for o in outcomes]
    return {
        "requests": len(outcomes),
        "answered_pct": 100.0 * len(answered) / len(outcomes),
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "failures": failures(outcomes),
    }


def failures(outcomes: list[Outcome]) -> dict[str, int]:
    """The requests not answered 200, by status or error."""
    counts = Counter(str(o.status) if o.status else o.error for o in outcomes if o.status != 200)
    return dict(counts)


def burst_summary(target: Target) -> dict[str, Any]:
    """BURST GETs at once: how many were answered, the slowest, what failed."""
    outcomes = asyncio.run(burst(target, "/2/info", None, BURST, 60))
    return {
        "answered": sum(o.status == 200 for o in outcomes),
        "slowest_s": max(o.seconds for o in outcomes),
        "failures": failures(outcomes),
    }


# The floods: what share of the connections each kind of client has.
FLOODS = {"bodies": {"body": 1.0}, "mixed": {kind: 1 / len(KINDS) for kind in KINDS}}


class Flood:
    """The hostile clients' process."""

    def __init__(self, cluster: TestCluster, total: int, shares: dict[str, float]) -> None:
        where = [cluster.node_ip, str(RAPI_PORT), str(cluster.rapi_ca)]
        per_kind = [f"--{kind}={round(total * share)}" for kind, share in shares.items()]
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "tests.helpers.rapi_flood", *where, f"--pace={PACE}", *per_kind],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ready(self) -> float:
        """Seconds until every hostile connection was open once (inf if never)."""
        assert self.proc.stdout is not None
        start = time.monotonic()
        ready, _, _ = select.select([self.proc.stdout], [], [], READY_TIMEOUT)
        if ready and self.proc.stdout.readline().strip() == "ready":
            return time.monotonic() - start
        return float("inf")

    def stop(self) -> int:
        """End it; how many connections it had to open again."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        out = self.proc.stdout.read()
        self.proc.wait(60)
        for line in out.splitlines():
            if line.startswith("reopened "):
                return int(line.split()[1])
        return -1


def stop_seconds(pid: int) -> float:
    """SIGTERM to ``pid``; seconds until it is gone (SIGKILL after STOP_TIMEOUT)."""
    pidfd = os.pidfd_open(pid)
    try:
        start = time.monotonic()
        os.kill(pid, signal.SIGTERM)
        ready, _, _ = select.select([pidfd], [], [], STOP_TIMEOUT)
        elapsed = time.monotonic() - start
        if not ready:
            os.kill(pid, signal.SIGKILL)
            select.select([pidfd], [], [], STOP_TIMEOUT)
        return elapsed
    finally:
        os.close(pidfd)


def renewal(cluster: TestCluster) -> dict[str, Any]:
    """renew-crypto --new-rapi-certificate: seconds from start to end, and what
    it said on stderr (a daemon killed for not stopping says so)."""
    start = time.monotonic()
    proc = subprocess.run(
        [PYTHON, "-m", "corral.cli.gnt_cluster", *RENEW],
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        start_new_session=True,  # no terminal to prompt on
    )
    return {"seconds": time.monotonic() - start, "stderr": proc.stderr.strip()}


def renewal_under(cluster: TestCluster, flood: Flood) -> dict[str, Any]:
    """The renewal once all of ``flood``'s connections are open."""
    try:
        ready = flood.ready()
        return {"ready_s": ready, **renewal(cluster)}
    finally:
        flood.stop()


def one_run(cluster: TestCluster, seconds: float, flood_size: int) -> dict[str, Any]:
    """A run's measurements (corral-rapi is stopped at its start, running at its end)."""
    start_rapi(cluster.paths, cluster.node_ip)
    target = Target(cluster.node_ip, RAPI_PORT, str(cluster.rapi_ca))
    result: dict[str, Any] = {"rss_idle_mib": rss_kib(rapi_pid(cluster)) / 1024}
    result["baseline"] = summary(asyncio.run(_legitimate(target, seconds, lambda: None)))
    result["burst"] = burst_summary(target)
    result["renewal"] = renewal(cluster)
    for name, shares in FLOODS.items():
        result[name] = under_flood(cluster, target, Flood(cluster, flood_size, shares), seconds)
        start_rapi(cluster.paths, cluster.node_ip)  # the flood's stop ended it
        result[name]["renewal"] = renewal_under(cluster, Flood(cluster, flood_size, shares))
    return result


def under_flood(
    cluster: TestCluster, target: Target, flood: Flood, seconds: float
) -> dict[str, Any]:
    """The legitimate GETs, a burst and a stop of corral-rapi during ``flood``."""
    pid = rapi_pid(cluster)
    result: dict[str, Any] = {}
    try:
        result["ready_s"] = flood.ready()
        rss: list[int] = []
        pids = {"corral-rapi": pid, "flood": flood.proc.pid, "legitimate client": os.getpid()}
        pids["corral-masterd"] = int(cluster.paths.pid_file("corral-masterd").read_text())
        cpu_before = {name: cpu_seconds(p) for name, p in pids.items()}
        started = time.monotonic()
        # Sampled as each anonymous GET starts (RATE / 2 a second).
        outcomes = asyncio.run(_legitimate(target, seconds, lambda: rss.append(rss_kib(pid))))
        window = time.monotonic() - started
        result["cpu"] = {
            name: round((cpu_seconds(p) - cpu_before[name]) / window, 2) for name, p in pids.items()
        }
        result["requests"] = summary(outcomes)
        result["rss_max_mib"] = max(rss) / 1024
        result["burst"] = burst_summary(target)
        result["stop_s"] = stop_seconds(pid)
    finally:
        result["reopened"] = flood.stop()
    return result


def make_figures(flood: int) -> dict[str, Figure]:
    figures = {
        "baseline_p99": Figure(
            "rapi_baseline_p99",
            "legitimate GETs, p99 latency, no hostile client",
            "ms",
            200,
            "max",
            "n/a",
        ),
        "burst": Figure(
            "rapi_burst_answered",
            f"{BURST} concurrent GETs (new connections) answered",
            "",
            BURST,
            "min",
            "n/a",
        ),
    }
    for name in FLOODS:
        under = f"under {flood:,} hostile connections ({name})"
        figures |= {
            f"{name}_answered": Figure(
                f"rapi_flood_{name}_answered",
                f"legitimate GETs answered {under}",
                "%",
                99,
                "min",
                "n/a",
            ),
            f"{name}_p99": Figure(
                f"rapi_flood_{name}_p99",
                f"legitimate GETs, p99 latency {under}",
                "ms",
                200,
                "max",
                "n/a",
            ),
            f"{name}_rss": Figure(
                f"rapi_flood_{name}_rss",
                f"corral-rapi RSS, largest, {under}",
                "MiB",
                100,
                "max",
                "n/a",
            ),
            f"{name}_burst": Figure(
                f"rapi_flood_{name}_burst",
                f"{BURST} concurrent GETs answered {under}",
                "",
                BURST,
                "min",
                "n/a",
            ),
            f"{name}_stop": Figure(
                f"rapi_flood_{name}_stop",
                f"corral-rapi stop (SIGTERM to exit) {under}",
                "s",
                1,
                "max",
                "n/a",
            ),
            f"{name}_renewal": Figure(
                f"rapi_flood_{name}_renewal",
                f"renew-crypto --new-rapi-certificate {under}: time added",
                "s",
                1,
                "max",
                "n/a",
            ),
        }
    return figures


def fill(figures: dict[str, Figure], runs: list[dict[str, Any]]) -> dict[str, float]:
    """Put every run's values into ``figures``; per flood, its p99 as a ratio
    to the p99 with no hostile client (medians, the same runs)."""
    figures["baseline_p99"].runs = [r["baseline"]["p99_ms"] for r in runs]
    figures["burst"].runs = [float(r["burst"]["answered"]) for r in runs]
    ratios = {}
    for name in FLOODS:
        figures[f"{name}_answered"].runs = [r[name]["requests"]["answered_pct"] for r in runs]
        figures[f"{name}_p99"].runs = [r[name]["requests"]["p99_ms"] for r in runs]
        figures[f"{name}_rss"].runs = [r[name]["rss_max_mib"] for r in runs]
        figures[f"{name}_burst"].runs = [float(r[name]["burst"]["answered"]) for r in runs]
        figures[f"{name}_stop"].runs = [r[name]["stop_s"] for r in runs]
        renewal = figures[f"{name}_renewal"]
        renewal.runs = [r[name]["renewal"]["seconds"] - r["renewal"]["seconds"] for r in runs]
        absolute = median([r[name]["renewal"]["seconds"] for r in runs])
        alone = median([r["renewal"]["seconds"] for r in runs])
        renewal.notes = f"{absolute:.2f} s, {alone:.2f} s with no hostile client"
        ratios[name] = round(figures[f"{name}_p99"].median / figures["baseline_p99"].median, 2)
        figures[f"{name}_p99"].notes = f"{ratios[name]}x the p99 with no hostile client"
    return ratios


def main() -> None:
    parser = arg_parser(__doc__ or NAME)
    parser.add_argument("--seconds", type=float, default=SECONDS, help="per window of GETs")
    parser.add_argument("--flood", type=int, default=FLOOD, help="hostile connections")
    args = parser.parse_args()
    ensure_bytecode()
    figures = make_figures(args.flood)
    runs = []
    with bench_cluster(NAME) as cluster:
        cluster.add_rapi_user(USER, PASSWORD, "write")
        for run in range(args.runs):
            stop_daemon(cluster.paths, RAPI)
            result = one_run(cluster, args.seconds, args.flood)
            runs.append(result)
            print(f"run {run + 1}: {result}", flush=True)
    ratios = fill(figures, runs)
    write_results(
        NAME,
        list(figures.values()),
        {
            "runs": args.runs,
            "flood": args.flood,
            "floods": FLOODS,
            "pace_s": PACE,
            "rate_per_s": RATE,
            "seconds_per_window": args.seconds,
            "request_timeout_s": TIMEOUT,
            "burst": BURST,
            "python": sys.version.split()[0],
        },
        {"runs": runs, "p99_ratio_to_baseline": ratios},
    )


if __name__ == "__main__":
    main()
