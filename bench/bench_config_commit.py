"""A config-changing job's cost with 100 and with 10,000 instances, end to end.

Two single-node clusters run side by side: one with 100 instances, one with
10,000 (diskless, not started, created by SubmitManyJobs batches as in
``bench_instances``).  The small one also runs 9,900 OP_TEST_DELAY(0) jobs,
so that both job queues hold 10,000 jobs and only the configuration's size
differs.  One sample is an OP_TAGS_SET of a new cluster tag submitted over
luxi, timed from just before SubmitJob until WaitForJobChange has shown it
succeeded and QueryJobs has confirmed it: the lock, the logical unit, the
config commit, the job's journal and the client's round trips.  An untimed
OP_TAGS_DEL then removes the tag, so the configuration keeps its size.  The
cluster tag touches no node (the master only rewrites its own ssconf file of
cluster tags).  The two clusters take turns, sample by sample, so that the
shared machine's drifting load weighs on both alike; the first ``WARM_UP``
turns are dropped.

Figures (medians of ``--runs`` runs; each run's value is the median of its
``COMMITS`` samples per cluster): the tag job's milliseconds with 100 and
with 10,000 instances, and their ratio 10,000/100.  Ganeti writes its whole
configuration on every commit, so there the cost grows with the number of
instances; Corral commits only the changed rows.

Targets [Ganeti 3.0.2: not measured]: ≤ 20 ms each; ratio ≤ 1.5.

``bench.compare --borrow config_commit`` lends this script to a base revision
older than it (200d382), so it uses only what 200d382 has:
``bench.common`` (``wait_all_final``: WaitForJobChange, then one QueryJobs),
``bench.bench_instances.create_many`` (so borrow ``instances`` too: 200d382's
version lets the allocator refuse the 2,049th instance on a 2-CPU machine) and
the luxi ``Client``.
"""

from __future__ import annotations

import time

from bench.bench_instances import create_many
from bench.common import (
    Figure,
    arg_parser,
    bench_cluster,
    ensure_bytecode,
    fill_queue,
    median,
    wait_all_final,
    write_results,
)
from corral import constants as C
from corral.luxi.client import Client
from tests.helpers.osdef import make_os

NAME = "config_commit"
SMALL = 100
BIG = 10_000
# Samples per cluster in one run, and turns dropped before the first run.
COMMITS = 15
WARM_UP = 3


def run_job(client: Client, op: dict[str, object]) -> None:
    """Submit a one-opcode job and wait until it succeeded."""
    job_id = client.submit_job([op])
    (status,) = wait_all_final(client, [job_id], 120)
    if status != C.JOB_STATUS_SUCCESS:
        raise RuntimeError(f"{op['OP_ID']} job {job_id} ended {status}")


def tag_job_ms(client: Client, tag: str) -> float:
    """Milliseconds of one cluster-tag job, submitted to succeeded; the tag is
    removed afterwards (untimed)."""
    start = time.perf_counter()
    run_job(client, {"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": [tag]})
    elapsed = (time.perf_counter() - start) * 1000
    run_job(client, {"OP_ID": "OP_TAGS_DEL", "kind": "cluster", "tags": [tag]})
    return elapsed


def fill(client: Client, instances: int) -> None:
    """``instances`` diskless instances, then trivial jobs up to BIG jobs in all."""
    create_many(client, [f"inst{i}" for i in range(instances)])
    if instances < BIG:
        fill_queue(client, BIG - instances)


def samples(clients: dict[str, Client], turns: int, first: int) -> dict[str, list[float]]:
    """``turns`` tag jobs per cluster, the clusters taking turns (the first one
    alternating, so that neither always follows the other's job)."""
    out: dict[str, list[float]] = {key: [] for key in clients}
    keys = list(clients)
    for turn in range(first, first + turns):
        for key in keys if turn % 2 == 0 else reversed(keys):
            out[key].append(tag_job_ms(clients[key], f"bench{turn}"))
    return out


def main() -> None:
    parser = arg_parser(__doc__ or NAME)
    args = parser.parse_args()
    ensure_bytecode()
    figs = {
        "small": Figure(
            "config_commit_100",
            f"tag job (config commit), {SMALL} instances",
            "ms",
            20,
            "max",
            "n/a",
        ),
        "big": Figure(
            "config_commit_10000",
            f"tag job (config commit), {BIG} instances",
            "ms",
            20,
            "max",
            "n/a",
        ),
        "ratio": Figure(
            "config_commit_ratio",
            f"tag job (config commit), {BIG} vs {SMALL} instances",
            "x",
            1.5,
            "max",
            "n/a",
        ),
    }
    raw: dict[str, list[float]] = {"small": [], "big": []}
    with (
        bench_cluster(f"{NAME}-small") as small,
        bench_cluster(f"{NAME}-big") as big,
        small.client() as small_client,
        big.client() as big_client,
    ):
        clients = {"small": small_client, "big": big_client}
        started = time.perf_counter()
        for cluster, client, count in ((small, small_client, SMALL), (big, big_client, BIG)):
            make_os(cluster.paths, "bench")
            fill(client, count)
        print(f"clusters filled in {time.perf_counter() - started:.0f} s", flush=True)
        samples(clients, WARM_UP, 0)
        for run in range(args.runs):
            got = samples(clients, COMMITS, WARM_UP + run * COMMITS)
            for key, values in got.items():
                raw[key] += values
                figs[key].runs.append(median(values))
            figs["ratio"].runs.append(figs["big"].runs[-1] / figs["small"].runs[-1])
            print(
                f"run {run + 1}: {SMALL} instances {figs['small'].runs[-1]:.1f} ms,"
                f" {BIG} instances {figs['big'].runs[-1]:.1f} ms",
                flush=True,
            )
    write_results(
        NAME,
        list(figs.values()),
        {
            "runs": args.runs,
            "commits_per_run": COMMITS,
            "warm_up": WARM_UP,
            "instances": [SMALL, BIG],
        },
        {"tag_job_ms": {k: [round(v, 2) for v in vs] for k, vs in raw.items()}},
    )


if __name__ == "__main__":
    main()
