"""What the benchmarks share: a cluster in a temporary root, timing, results.

Every benchmark runs a real single-node cluster (real ``corral-masterd`` and
``corral-noded`` processes) in a temporary root on its own 127.x.y.z address,
exactly as the integration tests do (``tests/helpers/cluster.py``).  A
benchmark measures one or more *figures*, each repeated several times; the
median of the runs is what is compared with the target, because the machine
is shared and noisy.  Results go to ``bench/results/<name>.json`` together
with the machine they were measured on, and are printed as a table.

Run a benchmark from the repository root with the venv's python, e.g.::

    .venv/bin/python -m bench.bench_job_throughput
"""

from __future__ import annotations

import argparse
import compileall
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from corral import constants as C
from corral.luxi.client import Client
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.jobs import wait_job_final

REPO_ROOT = Path(__file__).resolve().parent.parent
# Where results are written: ``bench/results``, unless this variable names
# another directory (``bench.compare`` uses it to keep its runs apart).
RESULTS_ENV = "CORRAL_BENCH_RESULTS"
RESULTS_DIR = Path(os.environ.get(RESULTS_ENV) or REPO_ROOT / "bench" / "results")
# The gnt-* commands are timed with the venv's own interpreter (not a pyenv shim).
_VENV_PYTHON = REPO_ROOT / ".venv" / "bin" / "python"
PYTHON = str(_VENV_PYTHON) if _VENV_PYTHON.exists() else sys.executable

# Ganeti's job statuses that end a job.
FINAL = C.JOB_STATUS_FINALIZED


def ensure_bytecode() -> None:
    """Compile Corral's modules to ``__pycache__``, as an installed package has them.

    pip (and Debian packaging) compile modules at install time, so a real
    ``gnt-job`` never compiles its sources at start-up.  Without this a run
    under ``PYTHONDONTWRITEBYTECODE=1`` would time the compiler instead.
    """
    compileall.compile_dir(str(REPO_ROOT / "corral"), quiet=1)


def time_gnt(cluster: TestCluster, command: str, *args: str) -> float:
    """Seconds one ``gnt-<command>`` takes, from a fresh process to its exit."""
    start = time.perf_counter()
    proc = subprocess.run(
        [PYTHON, "-m", f"corral.cli.gnt_{command}", *args],
        env=cluster.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"gnt-{command} {' '.join(args)} failed: {proc.stderr.decode()}")
    return elapsed


# Clusters
@contextmanager
def bench_cluster(name: str) -> Iterator[TestCluster]:
    """A fresh single-node cluster in a temporary root, destroyed afterwards."""
    with (
        tempfile.TemporaryDirectory(prefix=f"corral-bench-{name}-") as tmp,
        running_cluster(Path(tmp)) as cluster,
    ):
        yield cluster


def masterd_pid(cluster: TestCluster) -> int:
    """The pid of the cluster's running masterd (from its pid file)."""
    return int(cluster.paths.pid_file("corral-masterd").read_text().strip())


def rss_kib(pid: int) -> int:
    """Resident set size of a process in KiB (``VmRSS`` of /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


# Jobs
def delay_op(duration: float, **extra: Any) -> dict[str, Any]:
    """An OP_TEST_DELAY opcode that sleeps in masterd: on no node, so with no
    node RPC and no locks (``on_master`` would lock the master's node)."""
    return {"OP_ID": "OP_TEST_DELAY", "duration": duration, "on_master": False, **extra}


def submit_many(client: Client, jobs: list[list[dict[str, Any]]]) -> list[int]:
    """SubmitManyJobs; returns the job ids, failing if any job was refused."""
    results = client.submit_many_jobs(jobs)
    refused = [r[1] for r in results if not r[0]]
    if refused:
        raise RuntimeError(f"{len(refused)} jobs refused, first: {refused[0]}")
    return [int(r[1]) for r in results]


def wait_all_final(client: Client, job_ids: Sequence[int], timeout: float = 600) -> list[str]:
    """Block until every job has a final status; returns the statuses.

    Waits (WaitForJobChange, no polling sleep) on the last unfinished job, then
    checks all of them with one QueryJobs, until none is unfinished.
    """
    deadline = time.monotonic() + timeout
    pending = list(job_ids)
    statuses: dict[int, str] = {}
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(pending)} jobs still unfinished")
        wait_job_final(client, pending[-1], deadline - time.monotonic())
        rows = client.query_jobs(pending, ["id", "status"])
        still = []
        for job_id, row in zip(pending, rows, strict=True):
            if row is None:
                raise RuntimeError(f"job {job_id} lost")
            if row[1] in FINAL:
                statuses[job_id] = row[1]
            else:
                still.append(job_id)
        pending = still
    return [statuses[j] for j in job_ids]


def fill_queue(client: Client, count: int, batch: int = 2500, archive: bool = False) -> list[int]:
    """Run ``count`` trivial jobs to the end, in batches under the queue limit."""
    ids: list[int] = []
    while len(ids) < count:
        size = min(batch, count - len(ids))
        batch_ids = submit_many(client, [[delay_op(0)] for _ in range(size)])
        statuses = wait_all_final(client, batch_ids)
        if any(s != C.JOB_STATUS_SUCCESS for s in statuses):
            raise RuntimeError("a trivial job did not succeed")
        ids += batch_ids
        if archive:
            client.call("AutoArchiveJobs", -1, 600)
    return ids


# Statistics
def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def against_by_hand(
    figure: Figure, corral: Sequence[float], by_hand: Sequence[float], digits: int = 3
) -> dict[str, Any]:
    """Set ``figure``'s runs to Corral's times over the same guest's started by
    hand, run by run; the times and their medians, for the results' extras."""
    figure.runs = [c / h for c, h in zip(corral, by_hand, strict=True)]
    return {
        "corral_s": [round(t, digits) for t in corral],
        "by_hand_s": [round(t, digits) for t in by_hand],
        "corral_median_s": round(median(corral), digits),
        "by_hand_median_s": round(median(by_hand), digits),
    }


def percentile(values: Sequence[float], pct: float) -> float:
    """The nearest-rank percentile (p99 of 100 samples is the 99th smallest)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return float(ordered[rank - 1])


# Results
@dataclass
class Figure:
    """One measured figure: its runs, and how it compares with the target."""

    key: str
    title: str
    unit: str
    target: float
    # "max": the measured median must be at most the target; "min": at least.
    bound: str
    ganeti: str
    runs: list[float] = field(default_factory=list)
    notes: str = ""

    @property
    def median(self) -> float:
        return median(self.runs)

    @property
    def met(self) -> bool:
        if self.bound == "max":
            return self.median <= self.target
        return self.median >= self.target

    def target_text(self) -> str:
        return f"{'≤' if self.bound == 'max' else '≥'} {self.target:g} {self.unit}"

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "runs": [round(r, 3) for r in self.runs],
            "median": round(self.median, 3),
            "min": round(min(self.runs), 3),
            "max": round(max(self.runs), 3),
            "target_text": self.target_text(),
            "met": self.met,
        }


def machine_info() -> dict[str, Any]:
    """Where and when the figures were measured."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "hostname": platform.node(),
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "loadavg_at_end": load,
    }


def write_results(
    name: str,
    figures: Sequence[Figure],
    params: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write ``bench/results/<name>.json`` and print the figures as a table."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    data = {
        "benchmark": name,
        "machine": machine_info(),
        "params": params,
        "figures": [f.to_json() for f in figures],
        **(extra or {}),
    }
    path = RESULTS_DIR / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)
    print_table(figures)
    print(f"results: {shown_path(path)}")
    return path


def shown_path(path: Path) -> str:
    """``path`` relative to the repository if it is inside it, else absolute."""
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def print_table(figures: Sequence[Figure]) -> None:
    """The figures as a text table: target, Ganeti's figure, median, runs, verdict."""
    rows = [["Figure", "Target", "Ganeti 3.0.2", "Median", "Runs", "Met"]]
    for f in figures:
        runs = " ".join(f"{r:.4g}" for r in f.runs)
        rows.append(
            [
                f.title,
                f.target_text(),
                f.ganeti,
                f"{f.median:.4g} {f.unit}",
                runs,
                "yes" if f.met else "NO",
            ]
        )
    print_rows(rows)


def print_rows(rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for index, row in enumerate(rows):
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
        if index == 0:
            print("  ".join("-" * w for w in widths))


def arg_parser(description: str, runs: int = 5) -> argparse.ArgumentParser:
    """The options every benchmark takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--runs", type=int, default=runs, help=f"repetitions (default {runs})")
    return parser
