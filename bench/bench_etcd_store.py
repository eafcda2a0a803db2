"""A guarded config commit on etcd, with one and three members (issue 25).

One run: a real etcd cluster (Debian's etcd 3.4, members on loopback, mutual
TLS, ``tests/helpers/etcd.py``) and a master that holds the mastership lease;
``--commits`` config commits one after the other, each one node written as
``ConfigStore.commit`` does it (one transaction comparing the fence and the
cluster serial it read, writing the object, the change kept for followers
and the serial), timed from the call to its return; the run's figure is the
p50 of them.  In the same run, as baselines: the SQLite config store
(``synchronous=FULL``, the one-node cluster's) making the same commits, and a
bare etcd put on the three members (the floor of any write).  Shown beside:
1,000 trivial jobs' state changes (and a log entry each) written by one
``JobStore.write_batch``, as etcd's request limits split it, in rows/s.

Target: the guarded commit's p50 at most 5 ms with three members (the issue
measured a lease-guarded put at 3.54 ms).  Ganeti 3.0.2 writes config.data and
pushes it to candidates best-effort, with no compare at all.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.common import Figure, arg_parser, median, percentile, write_results
from corral.state.etcd.client import EtcdClient, put
from corral.state.etcd.config import EtcdConfigStore
from corral.state.etcd.jobs import EtcdJobStore
from corral.state.etcd.mastership import EtcdMastership
from corral.state.ports import ConfigChange
from corral.state.sqlite.config import SqliteConfigStore
from tests.helpers.etcd import started_cluster

NAME = "etcd_store"
# Jobs whose state changes one group commit writes.
JOB_BATCH = 1000


def node_row(index: int) -> dict[str, Any]:
    """A node object of about the size masterd writes."""
    return {
        "uuid": f"node-{index}",
        "name": f"node{index}.example.com",
        "serial_no": 1,
        "ctime": 1.0,
        "mtime": 1.0,
        "primary_ip": f"10.1.{index // 250 % 250}.{index % 250 + 1}",
        "secondary_ip": f"10.2.{index // 250 % 250}.{index % 250 + 1}",
        "ndparams": {"oob_program": "", "spindle_count": 1, "exclusive_storage": False},
        "tags": [],
    }


def initial() -> ConfigChange:
    cluster = {"uuid": "c1", "name": "cluster.example.com", "serial_no": 1, "ctime": 1.0}
    return ConfigChange(upserts={"cluster": [cluster | {"mtime": 1.0}]})


def change(index: int) -> ConfigChange:
    return ConfigChange(
        upserts={"nodes": [node_row(index)]}, expected={"nodes": {f"node-{index}": None}}
    )


async def p50_ms(count: int, write: Callable[[int], Awaitable[object]]) -> float:
    """The p50 of ``count`` calls of ``write`` (after a few warm-up calls)."""
    for index in range(-5, 0):
        await write(index)
    times = []
    for index in range(count):
        start = time.perf_counter()
        await write(index)
        times.append((time.perf_counter() - start) * 1000)
    return percentile(times, 50)


async def etcd_commits(root: Path, members: int, count: int) -> tuple[float, float, float]:
    """On a new cluster of ``members``: p50 of guarded config commits and of bare
    puts, job rows group-committed per second."""
    async with started_cluster(root, members) as bed:
        client: EtcdClient = bed.client()
        try:
            prefix = bed.prefix()
            lease = await EtcdMastership(client, prefix).acquire("node1", 30)
            await EtcdConfigStore.create(client, prefix, initial())
            store = EtcdConfigStore(client, prefix)
            snapshot = await store.load()
            serial = snapshot.serial

            async def commit(index: int) -> None:
                nonlocal serial
                await store.commit(change(index), serial + 1, lease.token)
                serial += 1

            commit_p50 = await p50_ms(count, commit)
            value = b"x" * 300
            put_p50 = await p50_ms(
                count, lambda i: client.txn([], [put(f"{prefix}bare/{i}", value)])
            )
            return commit_p50, put_p50, await job_rows_per_s(client, prefix, lease.token)
        finally:
            await client.close()


async def job_rows_per_s(client: EtcdClient, prefix: str, fence: int) -> float:
    """Job rows per second through ``write_batch`` (the journal's group commit):
    ``JOB_BATCH`` running jobs written at once, as etcd's limits split them."""
    jobs = EtcdJobStore(client, prefix)
    rows = await jobs.insert_new(JOB_BATCH, lambda ids: [job_row(i) for i in ids], fence)
    running = [row | {"status": "running", "start_ts": 2.0} for row in rows]
    start = time.perf_counter()
    await jobs.write_batch(
        running, [(r["id"], 0, 1, 2.0, "message", "started") for r in rows], fence
    )
    return JOB_BATCH / (time.perf_counter() - start)


def job_row(job_id: int) -> dict[str, Any]:
    """A trivial job's row (one OP_TEST_DELAY) as the queue stores it."""
    op = {"OP_ID": "OP_TEST_DELAY", "duration": 0, "on_master": True, "priority": 0}
    return {
        "id": job_id,
        "status": "queued",
        "priority": 0,
        "summary": ["TEST_DELAY(0)"],
        "received_ts": 1.0,
        "start_ts": None,
        "end_ts": None,
        "ops": [{"input": op, "status": "queued", "result": None, "log": []}],
        "log_serial": 0,
    }


async def sqlite_commits(root: Path, count: int) -> float:
    SqliteConfigStore.create(root / "config.db", initial())
    store = SqliteConfigStore(root / "config.db")
    serial = (await store.load()).serial

    async def commit(index: int) -> None:
        nonlocal serial
        await store.commit(change(index), serial + 1, 1)
        serial += 1

    try:
        return await p50_ms(count, commit)
    finally:
        await store.close()


async def one_run(count: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-etcd-") as tmp:
        root = Path(tmp)
        three, put_three, rows_three = await etcd_commits(root / "three", 3, count)
        one, _, _ = await etcd_commits(root / "one", 1, count)
        (root / "sqlite").mkdir()
        sqlite = await sqlite_commits(root / "sqlite", count)
    return {
        "three": three,
        "one": one,
        "sqlite": sqlite,
        "put_three": put_three,
        "rows_three": rows_three,
    }


def main() -> None:
    parser = arg_parser(__doc__ or NAME, runs=5)
    parser.add_argument("--commits", type=int, default=200, help="commits per run (default 200)")
    args = parser.parse_args()
    runs = [asyncio.run(one_run(args.commits)) for _ in range(args.runs)]
    figures = [
        Figure(
            "commit_3_members_ms", "guarded config commit p50, 3 members", "ms", 5, "max", "n/a"
        ),
        Figure("commit_1_member_ms", "guarded config commit p50, 1 member", "ms", 0, "min", ""),
        Figure("commit_sqlite_ms", "SQLite config commit p50 (one node)", "ms", 0, "min", ""),
        Figure("put_3_members_ms", "bare etcd put p50, 3 members (floor)", "ms", 0, "min", ""),
        Figure(
            "job_rows_3_members",
            f"{JOB_BATCH} job rows group-committed, 3 members",
            "rows/s",
            0,
            "min",
            "",
        ),
        Figure("three_vs_sqlite", "3-member commit / SQLite commit", "x", 0, "min", ""),
    ]
    keys = ("three", "one", "sqlite", "put_three", "rows_three")
    for figure, key in zip(figures, keys, strict=False):
        figure.runs = [run[key] for run in runs]
    figures[5].runs = [run["three"] / run["sqlite"] for run in runs]
    figures[0].notes = f"median of {args.runs} runs of {args.commits} commits each"
    write_results(NAME, figures, {"runs": args.runs, "commits": args.commits})
    print(f"3-member commit / bare put: {median(figures[0].runs) / median(figures[3].runs):.2f}x")


if __name__ == "__main__":
    main()
