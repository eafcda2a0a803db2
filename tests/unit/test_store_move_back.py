"""The master's stores move back from etcd into SQLite while jobs run: copy,
verify, switch, all or nothing (corral.services.store_move_back), on a real
3-member etcd."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral.services import store_move_back
from corral.services.etcd_members import EtcdMembers
from corral.services.store_move import move_to_etcd
from corral.services.store_move_back import move_to_sqlite
from corral.state import home
from corral.state.etcd.mastership import EtcdMastership
from corral.state.ports import LeaseLost
from corral.state.sqlite.config import SqliteConfigStore
from corral.state.sqlite.jobs import SqliteJobStore
from tests.helpers.etcd import EtcdBed
from tests.helpers.inprocess import InProcessCluster, in_process_cluster
from tests.helpers.waiting import poll_async

pytestmark = pytest.mark.usefixtures("etcd_three")


def _tag(index: int) -> dict[str, Any]:
    return {"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": [f"t{index}"]}


async def _in_etcd(cl: InProcessCluster, bed: EtcdBed) -> int:
    """Jobs (one archived) and a durable key, then the stores in etcd; the archived job."""
    for index in range(3):
        job = await cl.run(_tag(index))
        assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert await cl.queue.archive(job.job_id)
    await cl.durable.put("watcher/paused-until", 4102444800.0)
    assert cl.master.relays is not None and cl.keeper.lease is not None
    # Tag jobs log nothing: a log entry of the job before, to be carried along.
    log_row = (job.job_id - 1, 0, 1, 1.5, "message", "copied")
    await cl.master.relays.jobs.write_batch([], [log_row], cl.keeper.lease.token)
    await move_to_etcd(cl.master, bed.client())
    job = await cl.run(_tag(3))  # written in etcd only
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    return job.job_id - 1


async def _refusal(bed: EtcdBed, prefix: str) -> str:
    """What the mastership in etcd answers another candidate."""
    client = bed.client()
    try:
        await EtcdMastership(client, prefix).acquire("node9.example.com", 5.0)
    except LeaseLost as err:
        return err.message
    finally:
        await client.close()
    raise AssertionError("another candidate took the mastership in etcd")


def _aside_files(cl: InProcessCluster) -> list[Path]:
    return [p for p in cl.paths.config_db.parent.iterdir() if store_move_back.ASIDE in p.name]


async def test_the_stores_move_back_into_sqlite_while_jobs_run(
    tmp_path: Path, etcd_three: EtcdBed
) -> None:
    async with in_process_cluster(tmp_path, fenced=True) as cl:
        archived = await _in_etcd(cl, etcd_three)
        assert cl.keeper.lease is not None
        token = cl.keeper.lease.token
        prefix = home.prefix_of(cl.cfg.cluster.uuid)
        submitted: list[int] = []
        some_before = asyncio.Event()
        moved = asyncio.Event()

        async def workload() -> None:
            for index in range(10, 40):
                submitted.append(await cl.queue.submit([_tag(index)]))
                if index == 15:
                    some_before.set()
                if index == 30:
                    await moved.wait()

        work = asyncio.create_task(workload())
        await some_before.wait()
        where = await move_to_sqlite(cl.master)
        moved.set()
        await work
        outcomes = [await cl.wait(job_id) for job_id in submitted]
        assert [o.status for o in outcomes] == [C.JOB_STATUS_SUCCESS] * len(submitted)

        assert (
            home.read(cl.paths.store_home)
            == where
            == home.SqliteHome(cl.keeper.holder, where.moved_at_serial)
        )
        assert cl.master.backend is not None and cl.master.backend.kind == "sqlite"
        wanted = {f"t{i}" for i in [*range(4), *range(10, 40)]}
        assert set(cl.cfg.cluster.tags) == wanted
        # The same token as in etcd (nodes refuse older ones), renewed in SQLite.
        assert cl.keeper.lease is not None and cl.keeper.lease.token == token
        assert not cl.keeper.contested
        # The SQLite files hold everything, the jobs written in etcd too.
        config = SqliteConfigStore(cl.paths.config_db)
        jobs = SqliteJobStore(cl.paths.queue_db)
        try:
            assert (await config.load()).serial == cl.cfg.serial > where.moved_at_serial - 1
            rows = await jobs.fetch(None, ["status"], archived=True)
            assert {r["id"] for r in rows} >= {*submitted, archived, archived + 1}
            assert [r["archived"] for r in rows if r["id"] == archived] == [1]
            assert await jobs.fetch_logs(archived - 1) == [(0, [1, 1.5, "message", "copied"])]
        finally:
            await config.close()
            await jobs.close()
        assert cl.durable.get("watcher/paused-until") == 4102444800.0
        assert not _aside_files(cl)
        # No candidate may lead on what etcd still holds.
        assert "moved back to SQLite on node1" in await _refusal(etcd_three, prefix)

        # And into etcd again: the retired mastership is cleared, the token carried.
        await move_to_etcd(cl.master, etcd_three.client())
        job = await cl.run(_tag(50))
        assert job.status == C.JOB_STATUS_SUCCESS, job.error
        assert cl.keeper.lease is not None and cl.keeper.lease.token == token
        assert "held by node1" in await _refusal(etcd_three, prefix)


@pytest.mark.parametrize("step", ["verify", "put_in_place"])
async def test_a_failed_move_back_leaves_etcd_in_force_and_nothing_half_made(
    tmp_path: Path, etcd_three: EtcdBed, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    async with in_process_cluster(tmp_path, fenced=True) as cl:
        await _in_etcd(cl, etcd_three)
        prefix = home.prefix_of(cl.cfg.cluster.uuid)
        before = home.read(cl.paths.store_home)
        old_serial = await _sqlite_serial(cl)
        name = {"verify": "verify_copy", "put_in_place": "_put_in_place"}[step]
        original = getattr(store_move_back, name)

        def fails(*args: Any) -> Any:
            raise OSError(f"injected: {step} failed")

        monkeypatch.setattr(store_move_back, name, fails)
        with pytest.raises(OSError, match="injected"):
            await move_to_sqlite(cl.master)
        assert isinstance(before, home.EtcdHome)
        assert home.read(cl.paths.store_home) == before
        assert cl.master.backend is not None and cl.master.backend.kind == "etcd"
        assert not _aside_files(cl)
        assert await _sqlite_serial(cl) == old_serial  # the SQLite files as they were
        job = await cl.run(_tag(60))
        assert job.status == C.JOB_STATUS_SUCCESS, job.error
        # The mastership in etcd is the master's as before (renewed, not retired).
        refusal = await poll_async(
            lambda: _refusal(etcd_three, prefix),
            lambda text: "held by node1" in text,
            10.0,
            "the mastership in etcd renewed",
            interval=0.2,
        )
        assert "moved back" not in refusal

        # Tried again, it moves.
        monkeypatch.setattr(store_move_back, name, original)
        await move_to_sqlite(cl.master)
        assert cl.master.backend.kind == "sqlite"
        job = await cl.run(_tag(61))
        assert job.status == C.JOB_STATUS_SUCCESS, job.error
        assert {"t60", "t61"} <= set(cl.cfg.cluster.tags)
        assert await _sqlite_serial(cl) == cl.cfg.serial


async def _sqlite_serial(cl: InProcessCluster) -> int:
    config = SqliteConfigStore(cl.paths.config_db)
    try:
        return (await config.load()).serial
    finally:
        await config.close()


async def test_the_switch_goes_off_unless_the_stores_cannot_move_back(
    tmp_path: Path, etcd_three: EtcdBed, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with in_process_cluster(tmp_path, fenced=True) as cl:
        job = await cl.run({"OP_ID": "OP_CLUSTER_SET_PARAMS", "etcd_members": True})
        assert job.status == C.JOB_STATUS_SUCCESS, job.error
        await _in_etcd(cl, etcd_three)
        service = cl.master.etcd_members = EtcdMembers(cl.master, check_interval=3600)

        def fails(*args: Any) -> Any:
            raise OSError("injected: no room for the copy")

        monkeypatch.setattr(store_move_back, "verify_copy", fails)
        with pytest.raises(OSError, match="injected"):
            await service._move_back()
        off = {"OP_ID": "OP_CLUSTER_SET_PARAMS", "etcd_members": False}
        serial = cl.cfg.serial
        job = await cl.run(off)
        assert job.status == C.JOB_STATUS_ERROR
        assert job.result == [
            "OpPrereqError",
            [
                "Cannot stop the etcd members: the master's stores live in etcd and cannot"
                " move back into SQLite now (OSError('injected: no room for the copy'));"
                " fix that and try again",
                C.ECODE_STATE,
            ],
        ]
        assert cl.cfg.cluster.etcd_members is True and cl.cfg.serial == serial

        monkeypatch.undo()
        await service._move_back()
        assert service.move_back_failure is None
        job = await cl.run(off)
        assert job.status == C.JOB_STATUS_SUCCESS, job.error
        assert cl.cfg.cluster.etcd_members is False
