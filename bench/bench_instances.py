"""Instance operations, wall clock from the command line, on the fake hypervisor.

Figures (each the median of ``--runs`` samples; every sample is a fresh
``<venv>/bin/python -m corral.cli.gnt_instance ...`` process, timed from just
before the fork to its exit, so it includes start-up, the job and the wait):

* ``add`` of a diskless instance, not started (``-t diskless --no-start``,
  OS create is not run for diskless instances, as in Ganeti);
* ``add`` with one 64 MiB file disk, started (disk created, OS ``create`` script
  run, instance started);
* ``remove`` of such an instance;
* removing 200 instances with one SubmitManyJobs (client side, until all
  jobs succeeded; WaitForJobChange on the unfinished jobs);
* ``gnt-instance list`` with no instance and with 10,000 instances (diskless,
  not started; created in batches of SubmitManyJobs before timing).

Every instance add runs the real instance-add hooks machinery (an empty hooks
directory), the OS checks (``os_diagnose``) and the resource checks
(``hypervisor_info``) against the real noded.  The cluster has the tests'
permissive instance policy (``tests/helpers/cluster.py``): Ganeti's default
one refuses instances without disks and disks under 1 GiB.

Targets [Ganeti 3.0.2 on this machine kind]: add diskless ≤ 0.15 s [0.91 s];
add with disk, started ≤ 0.30 s [1.21 s]; remove ≤ 0.10 s [0.62 s]; 200
removes ≤ 5 s [74.7 s]; list ≤ 80 ms with none [0.17 s], ≤ 300 ms with 10,000.
"""

from __future__ import annotations

import time

from bench.common import (
    Figure,
    arg_parser,
    bench_cluster,
    ensure_bytecode,
    submit_many,
    time_gnt,
    wait_all_final,
    write_results,
)
from corral.luxi.client import Client
from tests.helpers.cluster import TestCluster
from tests.helpers.osdef import make_os

NAME = "instances"
MANY = 200
LIST_INSTANCES = 10_000
BATCH = 1_000


def gnt_instance(cluster: TestCluster, *args: str) -> float:
    return time_gnt(cluster, "instance", *args)


def create_op(name: str, node: str) -> dict[str, object]:
    """OP_INSTANCE_CREATE of a diskless instance with one NIC on ``node``, not started.

    The node is named, so the allocator does not run: it would refuse the
    instances past the node's vCPU limit (its CPUs x the policy's vcpu-ratio,
    2,048 on a 2-CPU machine), as Ganeti's hail does.
    """
    return {
        "OP_ID": "OP_INSTANCE_CREATE",
        "mode": "create",
        "instance_name": name,
        "pnode": node,
        "os_type": "bench+default",
        "disk_template": "diskless",
        "disks": [],
        "nics": [{}],
        "start": False,
        "name_check": False,
        "ip_check": False,
    }


def create_many(client: Client, names: list[str]) -> None:
    """Create ``names`` (``create_op``) on the cluster's only node, in SubmitManyJobs batches."""
    (((_, node),),) = client.query("node", ["name"])["data"]
    for start in range(0, len(names), BATCH):
        ids = submit_many(client, [[create_op(n, node)] for n in names[start : start + BATCH]])
        statuses = wait_all_final(client, ids)
        if set(statuses) != {"success"}:
            raise RuntimeError(f"creating instances failed: {sorted(set(statuses))}")


def single_ops(cluster: TestCluster, runs: int) -> tuple[list[float], list[float], list[float]]:
    add_diskless, add_disk, remove = [], [], []
    common = ["--no-name-check", "--no-ip-check", "-o", "bench+default"]
    for run in range(runs + 1):  # the first round warms caches and is dropped
        a = gnt_instance(cluster, "add", "-t", "diskless", "--no-start", *common, f"dl{run}")
        b = gnt_instance(cluster, "add", "-t", "file", "--disk", "0:size=64m", *common, f"fd{run}")
        c = gnt_instance(cluster, "remove", "-f", f"fd{run}")
        if run:
            add_diskless.append(a)
            add_disk.append(b)
            remove.append(c)
        print(
            f"round {run}: add diskless {a * 1000:.0f} ms, add+disk+start {b * 1000:.0f} ms,"
            f" remove {c * 1000:.0f} ms",
            flush=True,
        )
    return add_diskless, add_disk, remove


def remove_many(client: Client, runs: int) -> list[float]:
    samples = []
    for run in range(runs):
        names = [f"many{run}-{i}" for i in range(MANY)]
        create_many(client, names)
        start = time.perf_counter()
        ids = submit_many(
            client, [[{"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": n}] for n in names]
        )
        statuses = wait_all_final(client, ids)
        elapsed = time.perf_counter() - start
        if set(statuses) != {"success"}:
            raise RuntimeError(f"removing instances failed: {sorted(set(statuses))}")
        samples.append(elapsed)
        print(f"run {run + 1}: {MANY} removes in {elapsed:.2f} s", flush=True)
    return samples


def list_samples(cluster: TestCluster, runs: int) -> list[float]:
    gnt_instance(cluster, "list")  # warm-up
    return [gnt_instance(cluster, "list") * 1000 for _ in range(runs)]


def main() -> None:
    parser = arg_parser(__doc__ or NAME)
    args = parser.parse_args()
    ensure_bytecode()
    figures = {
        "add_diskless": Figure(
            "instance_add_diskless",
            "gnt-instance add, diskless, no start",
            "s",
            0.15,
            "max",
            "0.91 s",
        ),
        "add_disk": Figure(
            "instance_add_file_started",
            "gnt-instance add, 64 MiB file disk, started",
            "s",
            0.30,
            "max",
            "1.21 s",
        ),
        "remove": Figure(
            "instance_remove",
            "gnt-instance remove (file disk, running)",
            "s",
            0.10,
            "max",
            "0.62 s",
        ),
        "many": Figure(
            "instance_remove_200",
            f"{MANY} removes in one SubmitManyJobs",
            "s",
            5.0,
            "max",
            "74.7 s",
        ),
        "list_none": Figure(
            "instance_list_empty", "gnt-instance list, no instances", "ms", 80, "max", "170 ms"
        ),
        "list_many": Figure(
            "instance_list_10000",
            f"gnt-instance list, {LIST_INSTANCES} instances",
            "ms",
            300,
            "max",
            "n/a",
        ),
    }
    with bench_cluster(NAME) as cluster, cluster.client() as client:
        make_os(cluster.paths, "bench")
        figures["list_none"].runs = list_samples(cluster, args.runs)
        (figures["add_diskless"].runs, figures["add_disk"].runs, figures["remove"].runs) = (
            single_ops(cluster, args.runs)
        )
        figures["many"].runs = remove_many(client, min(args.runs, 3))
        created = time.perf_counter()
        existing = len(client.query("instance", ["name"])["data"])
        create_many(client, [f"inst{i}" for i in range(LIST_INSTANCES - existing)])
        print(
            f"{LIST_INSTANCES} instances created in {time.perf_counter() - created:.0f} s",
            flush=True,
        )
        figures["list_many"].runs = list_samples(cluster, args.runs)
    write_results(
        NAME,
        list(figures.values()),
        {"runs": args.runs, "instances_listed": LIST_INSTANCES, "removed": MANY},
    )


if __name__ == "__main__":
    main()
