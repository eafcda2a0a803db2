"""Config commits on a cluster with many instances and two more master
candidates: what masterd's config.data export (issue 22) costs the commits.

The cluster: a 3-node test bed (``corral.testbed``: node1 the master, node2
and node3 master candidates, each a real corral-noded), with ``INSTANCES``
diskless instances on node1 created by SubmitManyJobs batches.  With the
export, each burst of commits rewrites config.data (about 1 KB per instance)
on the master and sends it to both candidates; before it, nothing of the
kind happens.  ``bench.compare --borrow config_export`` measures both sides
with this same script (it uses only what the base has).

Figures (medians of ``--runs`` runs):

* a burst: ``BURST`` OP_TAGS_SET jobs, one per instance (one config commit
  each), submitted in one SubmitManyJobs, timed until all succeeded, as
  commits per second (an untimed burst of OP_TAGS_DEL puts the tags back);
* one commit: a cluster-tag job submitted over luxi, timed until it
  succeeded (median of ``SINGLE`` samples per run; an untimed OP_TAGS_DEL
  follows each).

Targets [Ganeti 3.0.2: not measured]: shown as ratios against the base
revision (``bench.compare``): the export must not slow commits (≈ 1.0).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench.bench_instances import create_op
from bench.common import (
    Figure,
    arg_parser,
    ensure_bytecode,
    median,
    submit_many,
    wait_all_final,
    write_results,
)
from corral import constants as C
from corral import testbed
from corral.luxi.client import Client
from tests.helpers.cluster import PERMISSIVE_IPOLICY
from tests.helpers.osdef import make_os

NAME = "config_export"
INSTANCES = 3_000
BURST = 300
SINGLE = 15
BATCH = 500


def run_all(client: Client, jobs: list[list[dict[str, object]]]) -> None:
    """Submit ``jobs`` at once and wait until all succeeded."""
    statuses = wait_all_final(client, submit_many(client, jobs))
    if set(statuses) != {C.JOB_STATUS_SUCCESS}:
        raise RuntimeError(f"jobs ended {sorted(set(statuses))}")


def create(client: Client, count: int) -> None:
    names = [f"inst{i:05d}" for i in range(count)]
    for start in range(0, count, BATCH):
        run_all(
            client, [[create_op(n, testbed.node_name(1))] for n in names[start : start + BATCH]]
        )


def tags_op(op_id: str, name: str, tag: str) -> dict[str, object]:
    return {"OP_ID": op_id, "kind": "instance", "name": name, "tags": [tag]}


def burst_per_s(client: Client, tag: str) -> float:
    """Commits per second of BURST one-commit tag jobs submitted at once."""
    names = [f"inst{i:05d}" for i in range(BURST)]
    start = time.perf_counter()
    run_all(client, [[tags_op("OP_TAGS_SET", n, tag)] for n in names])
    elapsed = time.perf_counter() - start
    run_all(client, [[tags_op("OP_TAGS_DEL", n, tag)] for n in names])
    return BURST / elapsed


def single_ms(client: Client, tag: str) -> float:
    """Milliseconds of one cluster-tag job (the tag removed afterwards, untimed)."""
    start = time.perf_counter()
    run_all(client, [[{"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": [tag]}]])
    elapsed = (time.perf_counter() - start) * 1000
    run_all(client, [[{"OP_ID": "OP_TAGS_DEL", "kind": "cluster", "tags": [tag]}]])
    return elapsed


def main() -> None:
    parser = arg_parser(__doc__ or NAME, runs=3)
    args = parser.parse_args()
    ensure_bytecode()
    burst = Figure("config_export_burst", f"{BURST} one-commit jobs at once, {INSTANCES}"
                   " instances, 2 more candidates", "commits/s", 0, "min", "n/a")  # fmt: skip
    single = Figure("config_export_single", f"one cluster-tag job, {INSTANCES} instances,"
                    " 2 more candidates", "ms", 1000, "max", "n/a")  # fmt: skip
    samples: list[float] = []
    with tempfile.TemporaryDirectory(prefix=f"corral-bench-{NAME}-") as tmp:
        bed = testbed.up(Path(tmp), nodes=3, init_args=PERMISSIVE_IPOLICY)
        try:
            make_os(bed.master.paths, "bench")
            with bed.client() as client:
                started = time.perf_counter()
                create(client, INSTANCES)
                print(f"{INSTANCES} instances in {time.perf_counter() - started:.0f} s")
                burst_per_s(client, "warm")
                for run in range(args.runs):
                    burst.runs.append(burst_per_s(client, f"burst{run}"))
                    ms = [single_ms(client, f"one{run}x{k}") for k in range(SINGLE)]
                    samples += ms
                    single.runs.append(median(ms))
                    print(f"run {run + 1}: burst {burst.runs[-1]:.0f} commits/s,"
                          f" one commit {single.runs[-1]:.1f} ms", flush=True)  # fmt: skip
        finally:
            bed.down()
    write_results(
        NAME,
        [burst, single],
        {"runs": args.runs, "instances": INSTANCES, "burst": BURST, "single": SINGLE},
        {"single_ms": [round(v, 2) for v in samples]},
    )


if __name__ == "__main__":
    main()
