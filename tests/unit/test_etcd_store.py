"""What the etcd backends do beyond the store contract, on real etcd members:
the mastership passing on when a lease runs out (and the former holder
fenced out), a write after kill -9 of the etcd leader, writes split to fit
etcd's request limits, bounded job texts, and the members themselves (mutual
TLS, a member killed -9 started again)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from corral import errors
from corral.state.etcd import client as etcd
from corral.state.etcd.config import EtcdConfigStore
from corral.state.etcd.jobs import MAX_TEXT, EtcdJobStore
from corral.state.etcd.keyspace import BYTES_PER_TXN, OPS_PER_TXN
from corral.state.etcd.kv import EtcdKeyValueStore
from corral.state.etcd.mastership import EtcdMastership
from corral.state.etcd.server import EtcdMember
from corral.state.ports import ConfigChange, FencedOut, LeaseLost, Versioned
from tests.helpers.etcd import AnswerCutter, EtcdBed, started_cluster

# The shortest lease etcd grants with its default election timeout (1 s).
SHORT_TTL = 2.0


@pytest.fixture
def client(etcd_three_client: etcd.EtcdClient) -> etcd.EtcdClient:
    return etcd_three_client


def _row(uuid: str, name: str, serial: int = 1, **data: Any) -> dict[str, Any]:
    return {"uuid": uuid, "name": name, "serial_no": serial, "ctime": 1.0, "mtime": 1.0, **data}


def _job(job_id: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": job_id,
        "status": "queued",
        "priority": 0,
        "summary": [f"OP_{job_id}"],
        "received_ts": 1.0,
        "start_ts": None,
        "end_ts": None,
        "ops": [{"n": job_id, **extra}],
        "log_serial": 0,
    }


async def _new_config(client: etcd.EtcdClient, prefix: str) -> EtcdConfigStore:
    initial = ConfigChange(upserts={"cluster": [_row("c1", "cluster.example.com")]})
    await EtcdConfigStore.create(client, prefix, initial)
    return EtcdConfigStore(client, prefix)


async def _revision(client: etcd.EtcdClient) -> int:
    _, revision, _ = await client.range("/")
    return revision


async def test_a_lease_that_ran_out_passes_on_and_fences_its_holder_out(
    etcd_three: EtcdBed, client: etcd.EtcdClient
) -> None:
    prefix = etcd_three.prefix()
    mastership = EtcdMastership(client, prefix)
    config = await _new_config(client, prefix)
    kv = EtcdKeyValueStore(client, prefix)
    jobs = EtcdJobStore(client, prefix)
    old = await mastership.acquire("node1", SHORT_TTL)
    await config.commit(ConfigChange(upserts={"nodes": [_row("n1", "node1")]}), 2, old.token)
    await jobs.insert_new(1, lambda ids: [_job(i) for i in ids], old.token)
    with pytest.raises(LeaseLost, match="held by node1"):
        await mastership.acquire("node2", 30)
    # node1 stops renewing: once etcd ends its lease, node2 gets the mastership.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10 * SHORT_TTL
    while True:
        try:
            new = await mastership.acquire("node2", 30)
            break
        except LeaseLost:
            assert loop.time() < deadline, "the lease of node1 never ran out"
    assert new.token > old.token and (await mastership.current()) == new
    # node1 does not know it was deposed: every write it makes is refused.
    with pytest.raises(FencedOut, match=rf"token {new.token}\) writes it now"):
        await config.commit(ConfigChange(upserts={"nodes": [_row("n2", "node2")]}), 3, old.token)
    with pytest.raises(FencedOut):
        await kv.put("drain", True, old.token)
    with pytest.raises(errors.JobQueueError, match="deposed"):
        await jobs.write_batch([_job(1) | {"status": "success"}], [], old.token)
    with pytest.raises(errors.JobQueueError, match="deposed"):
        await jobs.insert_new(1, lambda ids: [_job(i) for i in ids], old.token)
    with pytest.raises(LeaseLost):
        await mastership.renew(old, SHORT_TTL)
    assert (await config.load()).serial == 2 and await kv.get("drain") is None
    assert [r["status"] for r in await jobs.fetch(None, ["status"])] == ["queued"]
    # The new master writes.
    await config.commit(ConfigChange(upserts={"nodes": [_row("n2", "node2")]}), 3, new.token)


async def test_a_write_succeeds_after_kill_9_of_the_etcd_leader(tmp_path: Path) -> None:
    async with started_cluster(tmp_path, 3) as bed:
        client = bed.client()
        try:
            prefix = bed.prefix()
            config = await _new_config(client, prefix)
            kv = EtcdKeyValueStore(client, prefix)
            await kv.put("before", 1, 1)
            leader = await bed.cluster.leader(client)
            leader.kill()
            # Polled with a deadline: the members elect a new leader meanwhile.
            change = ConfigChange(upserts={"nodes": [_row("n1", "node1")]})
            await config.commit(change, 2, 1)
            assert (await config.load()).tables["nodes"] == [_row("n1", "node1")]
            assert (await bed.cluster.leader(client)) is not leader
            # The killed member starts again on its data and catches up (a
            # linearizable read of it waits until it applied the new write).
            await leader.start(client)
            alone = bed.client([leader.member.client_url])
            try:
                assert (await EtcdConfigStore(alone, prefix).load()).serial == 2
            finally:
                await alone.close()
        finally:
            await client.close()


async def test_a_batch_beyond_etcds_limits_is_split(
    etcd_three: EtcdBed, client: etcd.EtcdClient
) -> None:
    """2 MiB of job changes (more than one request takes) and more log entries
    than one transaction takes: several transactions, everything written."""
    jobs = EtcdJobStore(client, etcd_three.prefix())
    count = OPS_PER_TXN + 72  # 200 jobs of 10 KiB each
    await jobs.insert_new(count, lambda ids: [_job(i) for i in ids], 1)
    rows = [_job(i, blob="x" * 10_240) | {"status": "running"} for i in range(1, count + 1)]
    logs = [(i, 0, 1, 2.0, "message", f"job {i}") for i in range(1, count + 1)]
    assert sum(len(str(row)) for row in rows) > etcd.MAX_REQUEST_BYTES
    before = await _revision(client)
    await jobs.write_batch(rows, logs, 1)
    transactions = await _revision(client) - before
    assert transactions >= 2 * count * 10_240 // BYTES_PER_TXN
    fetched = await jobs.fetch(None, ["status", "ops"])
    assert [(r["id"], r["status"]) for r in fetched] == [
        (i, "running") for i in range(1, count + 1)
    ]
    assert fetched[-1]["ops"][0]["blob"] == "x" * 10_240
    assert await jobs.fetch_logs(count) == [(0, [1, 2.0, "message", f"job {count}"])]


async def test_a_config_group_beyond_etcds_limits_is_split(
    etcd_three: EtcdBed, client: etcd.EtcdClient
) -> None:
    prefix = etcd_three.prefix()
    config = await _new_config(client, prefix)
    changes = [
        ConfigChange(
            upserts={"nodes": [_row(f"n{i}", f"node{i}")]}, expected={"nodes": {f"n{i}": None}}
        )
        for i in range(OPS_PER_TXN)
    ]
    before = await _revision(client)
    assert await config.commit_many(changes, 2, 1) == [None] * len(changes)
    assert await _revision(client) - before >= 2
    loaded = await config.load()
    assert loaded.serial == 1 + len(changes) and len(loaded.tables["nodes"]) == len(changes)
    assert [c.serial for c in await config.changes(loaded.serial - 2, 0)] == [
        loaded.serial - 1,
        loaded.serial,
    ]


async def test_a_change_larger_than_a_request_is_refused_alone(
    etcd_three: EtcdBed, client: etcd.EtcdClient
) -> None:
    config = await _new_config(client, etcd_three.prefix())
    huge = ConfigChange(upserts={"nodes": [_row("n1", "node1", blob="x" * BYTES_PER_TXN)]})
    small = ConfigChange(upserts={"nodes": [_row("n2", "node2")]})
    refusals = await config.commit_many([huge, small], 2, 1)
    assert "larger than etcd takes" in str(refusals[0]) and refusals[1] is None
    loaded = await config.load()
    assert loaded.serial == 2 and [r["name"] for r in loaded.tables["nodes"]] == ["node2"]


async def test_long_job_texts_and_log_messages_are_cut(
    etcd_three: EtcdBed, client: etcd.EtcdClient
) -> None:
    jobs = EtcdJobStore(client, etcd_three.prefix())
    await jobs.insert_new(1, lambda ids: [_job(i) for i in ids], 1)
    output = "y" * (4 * MAX_TEXT)
    await jobs.write_batch([_job(1, output=output)], [(1, 0, 1, 2.0, "message", output)], 1)
    (row,) = await jobs.fetch([1], ["ops"])
    stored = row["ops"][0]["output"]
    assert stored.startswith("y" * MAX_TEXT) and stored.endswith(
        f"[{3 * MAX_TEXT} more characters cut]"
    )
    ((_, entry),) = await jobs.fetch_logs(1)
    assert entry[3] == stored


@pytest.mark.parametrize("what", ["config", "kv", "jobs", "delete", "delete-any"])
async def test_a_write_whose_answer_was_lost_is_sent_again_and_known_as_done(
    etcd_three: EtcdBed, what: str
) -> None:
    """The member applies a write but its answer never comes: the client sends
    it again, the compare it carries then fails, and the store recognises its
    own write (its nonce) instead of reporting a conflict."""
    cutter = AnswerCutter(etcd_three.cluster.endpoints[0])
    client = etcd_three.client([await cutter.start()])
    try:
        prefix = etcd_three.prefix()
        config = await _new_config(client, prefix)
        kv = EtcdKeyValueStore(client, prefix)
        jobs = EtcdJobStore(client, prefix)
        await config.load()
        await kv.put("warm", 1, 1)  # the fence key exists, the connection is open
        await kv.delete("warm", 1)  # and the delete markers' lease
        version = await kv.put("k", "v", 1)
        cutter.arm(spare=1 if what == "jobs" else 0)  # the jobs' first call reads the last id
        if what == "config":
            await config.commit(ConfigChange(upserts={"nodes": [_row("n1", "node1")]}), 2, 1)
            assert [c.serial for c in await config.changes(1, 0)] == [2]
        elif what == "kv":
            version = await kv.put("k", "w", 1, expected=version)
            assert await kv.get("k") == Versioned("w", version)
        elif what.startswith("delete"):  # a delete leaves no value: its marker says
            assert await kv.delete("k", 1, expected=None if what == "delete-any" else version)
            assert await kv.get("k") is None
        else:
            rows = await jobs.insert_new(2, lambda ids: [_job(i) for i in ids], 1)
            assert [r["id"] for r in rows] == [1, 2] and await jobs.last_id() == 2
        assert cutter.cut == 1
    finally:
        await client.close()
        await cutter.stop()


async def test_members_refuse_a_client_without_a_cluster_certificate(etcd_one: EtcdBed) -> None:
    url = etcd_one.cluster.endpoints[0] + "/v3/kv/range"
    no_cert = ssl.create_default_context(cafile=str(etcd_one.ca))
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientError):
            async with session.post(url, json={"key": etcd.b64("k")}, ssl=no_cert) as answer:
                await answer.read()


async def test_a_member_left_over_by_a_killed_manager_is_ended_on_start(tmp_path: Path) -> None:
    """The process that ran a member died (kill -9 of noded): a new manager
    on the same root ends the leftover member by its pid file and starts one;
    another stops it by its pid file."""
    async with started_cluster(tmp_path, 1) as bed:
        client = bed.client()
        try:
            kv = EtcdKeyValueStore(client, bed.prefix())
            await kv.put("k", "kept", 1)
            first = bed.cluster.members[0]
            leftover = first.pid
            assert leftover is not None
            again = EtcdMember(first.root, first.member, first.cluster, first.tls)
            await again.start(client)
            assert again.pid not in (None, leftover)
            assert not Path(f"/proc/{leftover}").exists() or _zombie(leftover)
            got = await kv.get("k")
            assert got is not None and got.value == "kept"
            # A third manager stops the member by its pid file, gracefully.
            running = again.pid
            assert running is not None
            await EtcdMember(first.root, first.member, first.cluster, first.tls).stop()
            assert _zombie(running) and not again.pid_file.exists()
            await again.stop()
        finally:
            await client.close()


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has exited but was not reaped yet (its parent is this test)."""
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")


async def test_one_masters_concurrent_submissions_build_their_jobs_once(
    etcd_three: EtcdBed, client: etcd.EtcdClient
) -> None:
    jobs = EtcdJobStore(client, etcd_three.prefix())
    built: list[int] = []

    def build_for(submission: int) -> Callable[[list[int]], list[dict[str, Any]]]:
        def build(ids: list[int]) -> list[dict[str, Any]]:
            built.append(submission)
            return [_job(i) for i in ids]

        return build

    rows = await asyncio.gather(*(jobs.insert_new(1, build_for(s), 0) for s in range(10)))
    assert sorted(row["id"] for (row,) in rows) == list(range(1, 11))
    assert sorted(built) == list(range(10))  # none raced another and built again
