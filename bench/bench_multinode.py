"""Queries on a 20-node cluster with 10,000 instances, and with one node unreachable.

The cluster: the usual temporary single-node cluster (``bench/common.py``)
plus 19 more real ``corral-noded`` processes, each with its own root on its own
127.x.y.z address (``tests/helpers/fanout.py``); the Node rows and the
instances are written into the configuration directly (masterd stopped, one
transaction), not by 10,000 jobs.  Every instance is admin-up, diskless,
and running on the fake hypervisor of its node (a state file there), spread
round-robin over the 20 nodes, so ``status`` and ``oper_ram`` are real answers
of 20 nodes.

Figures (medians of ``--runs`` samples; ``gnt-instance`` is a fresh process
of the venv's python each time, timed from before the fork to its exit):

* ``gnt-instance list`` (default fields) with 10,000 instances on 20 nodes;
* the same with one node's noded SIGSTOPped (connections to it hang: it is
  unreachable, not marked offline): the first listing after it stopped, which
  waits for it until the query deadline (masterd's ``--query-deadline``,
  5 s), and the next listing, which does not ask it again (each sample: stop
  the node, time both listings, check its instances showed
  ``ERROR_nodedown``, continue it and wait until they show ``running``);
* ``gnt-instance list ONE`` with 100 and with 10,000 instances;
* a config commit's cost with 100 and with 10,000 instances, their ratio: a
  ``ConfigManager`` commit of one instance's new tag timed directly, on copies
  of the cluster's configuration taken at 100 and at 10,000 instances (SQLite
  as masterd has it), the two taking turns.  (A tag job's round trip over luxi
  is dominated by the job queue's fsyncs, which the other processes of a
  shared machine make too noisy to compare one phase with another.)

Targets [Ganeti 3.0.2: not measured]: list ≤ 300 ms; first listing with a
node unreachable ≤ deadline + 300 ms, the next ≤ 300 ms; list ONE ≤ 50 ms;
commit ratio 10,000/100 ≤ 1.5.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import tempfile
import time
from pathlib import Path

from bench.common import (
    Figure,
    arg_parser,
    ensure_bytecode,
    median,
    time_gnt,
    write_results,
)
from corral.config.manager import ConfigManager
from corral.luxi.client import Client
from corral.objects import Instance
from corral.rpc.reachability import DEFAULT_QUERY_DEADLINE
from corral.state.sqlite.config import SqliteConfigStore
from corral.state.sqlite.kv import SqliteMastership
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.fanout import FanoutBed
from tests.helpers.waiting import wait_until

NAME = "multinode"
NODES = 20
INSTANCES = 10_000
SMALL = 100
# The node made unreachable: the last one (not the master's).
STOPPED = NODES - 1
# Samples dropped before each figure: a restarted masterd (and the nodes
# getting their files from it) settles first.
WARM_UP = 5
# Config commits timed per instance count (each about a millisecond: many).
COMMITS = 20


def node_names(cluster: TestCluster) -> list[str]:
    return [cluster.node_name, *(f"node{i}.example.com" for i in range(2, NODES + 1))]


def placement(nodes: list[str], start: int, stop: int) -> dict[str, str]:
    """Instances ``inst<i>`` for i in [start, stop), round-robin over ``nodes``."""
    return {f"inst{i:05d}": nodes[i % len(nodes)] for i in range(start, stop)}


def list_ms(cluster: TestCluster, *args: str) -> float:
    return time_gnt(cluster, "instance", "list", *args) * 1000


def list_one(cluster: TestCluster, name: str, runs: int) -> list[float]:
    for _ in range(WARM_UP):
        list_ms(cluster, name)
    return [list_ms(cluster, name) for _ in range(runs)]


def snapshot(cluster: TestCluster, directory: Path) -> Path:
    """A consistent copy of the cluster's configuration and mastership (SQLite's
    backup) in ``directory``: a master of the copy fences as masterd does."""
    directory.mkdir()
    for path in (cluster.paths.config_db, cluster.paths.state_db):
        with sqlite3.connect(path) as src, sqlite3.connect(directory / path.name) as dst:
            src.backup(dst)
    return directory


async def commit_ms(copies: dict[str, Path], instance: str, runs: int) -> dict[str, list[float]]:
    """Per configuration copy: ConfigManager commits of one instance's new tag,
    timed in this process as masterd commits them (the master of each copy),
    the copies taking turns (so that the machine's load drifting over time
    weighs on all alike), after WARM_UP rounds."""
    managers: dict[str, ConfigManager] = {}
    for key, directory in copies.items():
        managers[key] = cfg = await ConfigManager.open(SqliteConfigStore(directory / "config.db"))
        mastership = SqliteMastership(directory / "state.db")
        cfg.fence = (await mastership.acquire("bench", 600)).token
        await mastership.close()
    samples: dict[str, list[float]] = {key: [] for key in copies}
    try:
        for run in range(runs + WARM_UP):
            for key, cfg in managers.items():
                inst = cfg.lookup(Instance, instance).model_copy(deep=True)
                inst.tags.append(f"t{run}")
                start = time.perf_counter()
                tx = cfg.transaction()
                tx.update(inst)
                await tx.commit()
                if run >= WARM_UP:
                    samples[key].append((time.perf_counter() - start) * 1000)
    finally:
        for cfg in managers.values():
            await cfg.close()
    return samples


def status_of(client: Client, instance: str) -> str:
    rows = client.query("instance", ["status"], ["=", "name", instance])["data"]
    return str(rows[0][0][1])


def unreachable(
    cluster: TestCluster, client: Client, pid: int, victim: str, runs: int
) -> tuple[list[float], list[float]]:
    """(first, next) listing times with the node of ``victim`` stopped, per run."""
    first, after = [], []
    for run in range(runs):
        os.kill(pid, signal.SIGSTOP)
        try:
            first.append(list_ms(cluster))
            after.append(list_ms(cluster))
            shown = status_of(client, victim)
        finally:
            os.kill(pid, signal.SIGCONT)
        if shown != "ERROR_nodedown":
            raise RuntimeError(f"{victim} shown as {shown} while its node was stopped")
        wait_until(lambda: status_of(client, victim) == "running", 60, "the node back")
        print(f"run {run + 1}: first {first[-1]:.0f} ms, next {after[-1]:.0f} ms", flush=True)
    return first, after


def figures(deadline: float) -> dict[str, Figure]:
    limit = deadline * 1000 + 300
    return {
        "list": Figure(
            "multinode_list",
            f"gnt-instance list, {INSTANCES} instances on {NODES} nodes",
            "ms",
            300,
            "max",
            "n/a",
        ),
        "first": Figure(
            "multinode_list_unreachable_first",
            "the same, one node unreachable: first listing",
            "ms",
            limit,
            "max",
            "n/a",
            notes=f"query deadline {deadline:g} s",
        ),
        "next": Figure(
            "multinode_list_unreachable_next",
            "the same, one node unreachable: next listing",
            "ms",
            300,
            "max",
            "n/a",
        ),
        "one_small": Figure(
            "list_one_100", f"gnt-instance list ONE, {SMALL} instances", "ms", 50, "max", "n/a"
        ),
        "one_big": Figure(
            "list_one_10000",
            f"gnt-instance list ONE, {INSTANCES} instances",
            "ms",
            50,
            "max",
            "n/a",
        ),
        "ratio": Figure(
            "commit_ratio",
            f"config commit, {INSTANCES} vs {SMALL} instances",
            "x",
            1.5,
            "max",
            "n/a",
            notes="ConfigManager commit timed directly, the two sizes taking turns",
        ),
    }


def main() -> None:
    parser = arg_parser(__doc__ or NAME)
    args = parser.parse_args()
    ensure_bytecode()
    deadline = DEFAULT_QUERY_DEADLINE
    figs = figures(deadline)
    with (
        tempfile.TemporaryDirectory(prefix=f"corral-bench-{NAME}-") as tmp,
        running_cluster(Path(tmp)) as cluster,
    ):
        bed = FanoutBed(cluster)
        try:
            nodes = node_names(cluster)
            started = time.perf_counter()
            bed.add_nodes(Path(tmp) / "nodes", nodes[1:])
            bed.place(placement(nodes, 0, SMALL))
            print(f"{NODES} nodes in {time.perf_counter() - started:.0f} s", flush=True)
            figs["one_small"].runs = list_one(cluster, "inst00042", args.runs)
            copies = {"small": snapshot(cluster, Path(tmp) / "config-small")}
            started = time.perf_counter()
            bed.place(placement(nodes, SMALL, INSTANCES))
            print(f"{INSTANCES} instances in {time.perf_counter() - started:.0f} s", flush=True)
            copies["big"] = snapshot(cluster, Path(tmp) / "config-big")
            commits = asyncio.run(commit_ms(copies, "inst00042", max(COMMITS, args.runs)))
            with cluster.client() as client:
                figs["one_big"].runs = list_one(cluster, "inst00042", args.runs)
                for _ in range(WARM_UP):
                    list_ms(cluster)
                figs["list"].runs = [list_ms(cluster) for _ in range(args.runs)]
                pid = bed.nodes[nodes[STOPPED]].pid
                assert pid is not None
                victim = next(iter(placement(nodes, STOPPED, STOPPED + 1)))
                figs["first"].runs, figs["next"].runs = unreachable(
                    cluster, client, pid, victim, args.runs
                )
        finally:
            bed.stop()
    figs["ratio"].runs = [median(commits["big"]) / median(commits["small"])]
    write_results(
        NAME,
        list(figs.values()),
        {"runs": args.runs, "nodes": NODES, "instances": INSTANCES, "query_deadline": deadline},
        {"commit_ms": {k: [round(v, 2) for v in vs] for k, vs in commits.items()}},
    )


if __name__ == "__main__":
    main()
