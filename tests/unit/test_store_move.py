"""The master's stores move from SQLite into etcd while jobs run: copy, verify,
switch, all or nothing (corral.services.store_move), on a real 3-member etcd."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral.objects import Cluster
from corral.services.store_move import move_to_etcd
from corral.state import home
from corral.state.backend import etcd_parts
from corral.state.etcd.client import EtcdError
from corral.state.etcd.jobs import EtcdJobStore
from corral.state.relay import Gate
from corral.state.sqlite.config import SqliteConfigStore
from tests.helpers.etcd import EtcdBed
from tests.helpers.inprocess import InProcessCluster, in_process_cluster

pytestmark = pytest.mark.usefixtures("etcd_three")


def _tag(index: int) -> dict[str, Any]:
    return {"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": [f"t{index}"]}


async def _keys(bed: EtcdBed, prefix: str) -> int:
    client = bed.client()
    try:
        kvs, _ = await client.scan(prefix)
        return len(kvs)
    finally:
        await client.close()


async def _prepare(cl: InProcessCluster) -> int:
    """Some of everything: finished jobs (one archived), a durable key."""
    for index in range(3):
        job = await cl.run(_tag(index))
        assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert await cl.queue.archive(job.job_id)
    await cl.durable.put("watcher/paused-until", 4102444800.0)
    return job.job_id


async def test_the_stores_move_into_etcd_while_jobs_run(
    tmp_path: Path, etcd_three: EtcdBed
) -> None:
    async with in_process_cluster(tmp_path, fenced=True) as cl:
        archived = await _prepare(cl)
        token = cl.keeper.lease.token if cl.keeper.lease else -1
        submitted: list[int] = []
        some_before = asyncio.Event()
        moved = asyncio.Event()

        async def workload() -> None:
            # Jobs before, during and after the move: each submission waits for
            # its acknowledgement; the move must not lose or fail any.
            for index in range(10, 40):
                submitted.append(await cl.queue.submit([_tag(index)]))
                if index == 15:
                    some_before.set()
                if index == 30:
                    await moved.wait()

        work = asyncio.create_task(workload())
        await some_before.wait()
        where = await move_to_etcd(cl.master, etcd_three.client())
        moved.set()
        await work
        outcomes = [await cl.wait(job_id) for job_id in submitted]
        assert [o.status for o in outcomes] == [C.JOB_STATUS_SUCCESS] * len(submitted)

        # What masterd holds is what etcd holds, and nothing was lost.
        assert home.read(cl.paths.store_home) == where
        assert where.prefix == home.prefix_of(cl.cfg.cluster.uuid)
        wanted = {f"t{i}" for i in [*range(3), *range(10, 40)]}
        assert set(cl.cfg.cluster.tags) == wanted
        client = etcd_three.client()
        try:
            config, jobs, kv, mastership = etcd_parts(client, where.prefix)
            snapshot = await config.load()
            assert snapshot.serial == cl.cfg.serial
            (cluster,) = snapshot.tables[Cluster.TABLE]
            assert set(cluster["tags"]) == wanted
            rows = await jobs.fetch(None, ["status"], archived=True)
            assert {r["id"] for r in rows} >= {*submitted, archived}
            assert [r["archived"] for r in rows if r["id"] == archived] == [1]
            assert await jobs.last_id() == max(submitted)
            assert (await kv.get("watcher/paused-until")) is not None
            # The same master, the same token: the nodes see no new master.
            lease = await mastership.current()
            assert lease is not None and lease.token == token
        finally:
            await client.close()
        # The SQLite files stayed as they were at the move.
        sqlite = SqliteConfigStore(cl.paths.config_db)
        try:
            assert (await sqlite.load()).serial == where.moved_at_serial < cl.cfg.serial
        finally:
            await sqlite.close()


async def test_a_failed_move_leaves_sqlite_in_force_and_nothing_in_etcd(
    tmp_path: Path, etcd_three: EtcdBed, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with in_process_cluster(tmp_path, fenced=True) as cl:
        await _prepare(cl)
        prefix = home.prefix_of(cl.cfg.cluster.uuid)
        copy_in = EtcdJobStore.copy_in

        async def fails(*args: Any, **kwargs: Any) -> None:
            raise EtcdError("injected: etcd went away during the copy")

        # The configuration is copied by then: what it wrote must go again.
        monkeypatch.setattr(EtcdJobStore, "copy_in", fails)
        with pytest.raises(EtcdError, match="injected"):
            await move_to_etcd(cl.master, etcd_three.client())
        assert await _keys(etcd_three, prefix) == 0
        assert not cl.paths.store_home.exists()
        assert cl.master.backend is not None and cl.master.backend.kind == "sqlite"
        job = await cl.run(_tag(50))
        assert job.status == C.JOB_STATUS_SUCCESS, job.error
        sqlite = SqliteConfigStore(cl.paths.config_db)
        try:
            assert (await sqlite.load()).serial == cl.cfg.serial
        finally:
            await sqlite.close()

        # Tried again, it moves.
        monkeypatch.setattr(EtcdJobStore, "copy_in", copy_in)
        await move_to_etcd(cl.master, etcd_three.client())
        assert cl.master.backend is not None and cl.master.backend.kind == "etcd"
        job = await cl.run(_tag(51))
        assert job.status == C.JOB_STATUS_SUCCESS, job.error
        assert {"t50", "t51"} <= set(cl.cfg.cluster.tags)


async def test_the_gate_waits_out_calls_and_holds_new_ones_during_a_move() -> None:
    gate = Gate()
    order: list[str] = []
    release_first = asyncio.Event()

    async def call(name: str, hold: asyncio.Event | None = None) -> None:
        async with gate.call():
            order.append(f"{name} runs")
            if hold is not None:
                await hold.wait()
        order.append(f"{name} ends")

    async def move() -> None:
        async with gate.move():
            order.append("move")

    first = asyncio.create_task(call("first", release_first))
    await asyncio.sleep(0)  # the first call holds the gate
    moving = asyncio.create_task(move())
    await asyncio.sleep(0)
    second = asyncio.create_task(call("second"))
    await asyncio.sleep(0)
    assert order == ["first runs"]  # the move waits for it, the second for the move
    release_first.set()
    await asyncio.gather(first, moving, second)
    assert order == ["first runs", "first ends", "move", "second runs", "second ends"]
