"""The contract of the state ports (corral.state.ports), which every backend
passes: SQLite (one node) and etcd (master candidates; a real three-member
cluster, tests/helpers/etcd.py).

Each test gets a fresh set of the four stores through a backend's factory.
What one backend may do differently is a flag of the backend (the SQLite
mastership is always granted: there is no other candidate to wait for).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from corral import errors
from corral.state import ports
from corral.state.etcd.client import EtcdClient
from corral.state.etcd.config import EtcdConfigStore
from corral.state.etcd.jobs import EtcdJobStore
from corral.state.etcd.kv import EtcdKeyValueStore
from corral.state.etcd.mastership import EtcdMastership
from corral.state.ports import ConfigChange, Conflict, FencedOut, LeaseLost
from corral.state.sqlite.config import SqliteConfigStore
from corral.state.sqlite.jobs import SqliteJobStore
from corral.state.sqlite.kv import SqliteKeyValueStore, SqliteMastership
from tests.helpers.etcd import EtcdBed

KEPT = 3  # changes a config store keeps, at least, when a test asks it to


@dataclass
class Stores:
    config: ports.ConfigStore
    jobs: ports.JobStore
    kv: ports.KeyValueStore
    mastership: ports.Mastership
    # The backend hands the mastership over while a lease runs (one node).
    takeover: bool
    client: EtcdClient | None = None

    async def close(self) -> None:
        for store in (self.config, self.jobs, self.kv, self.mastership):
            await store.close()
        if self.client is not None:
            await self.client.close()


def _initial() -> ConfigChange:
    return ConfigChange(upserts={"cluster": [_row("c1", "cluster.example.com")]})


def _row(uuid: str, name: str, serial: int = 1, **data: Any) -> dict[str, Any]:
    return {"uuid": uuid, "name": name, "serial_no": serial, "ctime": 1.0, "mtime": 1.0, **data}


async def _sqlite(request: pytest.FixtureRequest, tmp: Path) -> Stores:
    SqliteConfigStore.create(tmp / "config.db", _initial())
    return Stores(
        SqliteConfigStore(tmp / "config.db", kept_changes=KEPT),
        SqliteJobStore(tmp / "queue.db"),
        SqliteKeyValueStore(tmp / "state.db"),
        SqliteMastership(tmp / "state.db"),
        takeover=True,
    )


async def _etcd(request: pytest.FixtureRequest, tmp: Path) -> Stores:
    bed: EtcdBed = request.getfixturevalue("etcd_three")
    client, prefix = bed.client(), bed.prefix()
    await EtcdConfigStore.create(client, prefix, _initial())
    return Stores(
        EtcdConfigStore(client, prefix, kept_changes=KEPT),
        EtcdJobStore(client, prefix),
        EtcdKeyValueStore(client, prefix),
        EtcdMastership(client, prefix),
        takeover=False,
        client=client,
    )


BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], Awaitable[Stores]]] = {
    "sqlite": _sqlite,
    "etcd": _etcd,
}


@pytest.fixture(params=sorted(BACKENDS))
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    made = await BACKENDS[request.param](request, tmp_path)
    try:
        yield made
    finally:
        await made.close()


def node_change(uuid: str, name: str, read: int | None, serial: int = 1) -> ConfigChange:
    """A change that writes node ``uuid`` having read it at ``read`` (None: new)."""
    return ConfigChange(
        upserts={"nodes": [_row(uuid, name, serial)]}, expected={"nodes": {uuid: read}}
    )


# The configuration
async def test_config_commits_in_serial_order(stores: Stores) -> None:
    first = await stores.config.load()
    assert first.serial == 1 and first.tables["cluster"][0]["name"] == "cluster.example.com"
    await stores.config.commit(node_change("n1", "node1", None), 2, 1)
    await stores.config.commit(node_change("n1", "node1b", 1, serial=2), 3, 1)
    loaded = await stores.config.load()
    assert loaded.serial == 3 and loaded.tables["nodes"] == [_row("n1", "node1b", 2)]
    deletion = ConfigChange(deletes={"nodes": ["n1"]}, expected={"nodes": {"n1": 2}})
    await stores.config.commit(deletion, 4, 1)
    assert (await stores.config.load()).tables["nodes"] == []


@pytest.mark.parametrize(
    ("change", "serial", "text"),
    [
        (node_change("n2", "node2", None), 4, "at serial 2, not 3"),  # skips a serial
        (node_change("n1", "node1", None), 3, "the change read None"),  # exists already
        (node_change("n1", "node1", 7, serial=8), 3, "at serial 1, the change read 7"),
    ],
)
async def test_config_refuses_a_change_based_on_what_changed(
    stores: Stores, change: ConfigChange, serial: int, text: str
) -> None:
    await stores.config.commit(node_change("n1", "node1", None), 2, 1)
    before = await stores.config.load()
    with pytest.raises(Conflict, match=text):
        await stores.config.commit(change, serial, 1)
    assert await stores.config.load() == before


async def test_config_commits_many_in_one_write_each_refused_alone(stores: Stores) -> None:
    """A group commit: the changes that hold are written in order, one serial
    each; a change based on what changed, or clashing with a name, is left out
    alone and the next one takes its serial."""
    await stores.config.commit(node_change("n1", "node1", None), 2, 1)
    changes = [
        node_change("n2", "node2", None),
        node_change("n1", "node1x", 7, serial=8),  # read at a serial it never had
        node_change("n3", "node2", None),  # node2's name, taken by the first change
        node_change("n1", "node1b", 1, serial=2),
    ]
    refusals = await stores.config.commit_many(changes, 3, 1)
    assert refusals[0] is None and refusals[3] is None
    assert isinstance(refusals[1], Conflict) and "the change read 7" in str(refusals[1])
    assert refusals[2] is not None
    loaded = await stores.config.load()
    assert loaded.serial == 4
    assert sorted(row["name"] for row in loaded.tables["nodes"]) == ["node1b", "node2"]
    assert [c.serial for c in await stores.config.changes(2, 0)] == [3, 4]


async def test_config_many_from_a_deposed_writer_are_all_refused(stores: Stores) -> None:
    await stores.config.commit(node_change("n1", "node1", None), 2, 5)
    with pytest.raises(FencedOut):
        await stores.config.commit_many([node_change("n2", "node2", None)], 3, 4)
    assert (await stores.config.load()).serial == 2


async def test_config_refuses_a_deposed_writer(stores: Stores) -> None:
    await stores.config.commit(node_change("n1", "node1", None), 2, 5)
    deposed = r"token 5\) writes it now; this one \(token 4\) was deposed"
    with pytest.raises(FencedOut, match=deposed):
        await stores.config.commit(node_change("n2", "node2", None), 3, 4)
    assert (await stores.config.load()).serial == 2
    await stores.config.commit(node_change("n2", "node2", None), 3, 6)
    assert (await stores.config.load()).serial == 3


async def test_config_changes_since_a_serial(stores: Stores) -> None:
    assert await stores.config.changes(1, 0) == []
    await stores.config.commit(node_change("n1", "node1", None), 2, 1)
    await stores.config.commit(node_change("n2", "node2", None), 3, 1)
    changes = await stores.config.changes(1, 0)
    assert [c.serial for c in changes] == [2, 3]
    assert changes[1].change.upserts["nodes"][0]["name"] == "node2"
    assert [c.serial for c in await stores.config.changes(2, 0)] == [3]


async def test_config_changes_wait_for_a_commit(stores: Stores) -> None:
    waiting = asyncio.create_task(stores.config.changes(1, 30))
    await asyncio.sleep(0)  # the waiter has asked (it answers only after a commit)
    assert not waiting.done()
    await stores.config.commit(node_change("n1", "node1", None), 2, 1)
    assert [c.serial for c in await waiting] == [2]


async def test_config_changes_too_old_are_said_to_be_gone(stores: Stores) -> None:
    for serial in range(2, 4 + 2 * KEPT):
        await stores.config.commit(node_change(f"n{serial}", f"node{serial}", None), serial, 1)
    with pytest.raises(ports.ChangesExpired, match="load the configuration again"):
        await stores.config.changes(1, 0)


# The job queue
def _job(job_id: int, status: str = "queued", end: float | None = None) -> dict[str, Any]:
    return {
        "id": job_id,
        "status": status,
        "priority": 0,
        "summary": [f"OP_{job_id}"],
        "received_ts": 1.0,
        "start_ts": None,
        "end_ts": end,
        "ops": [{"n": job_id}],
        "log_serial": 0,
    }


async def test_jobs_get_increasing_ids_and_come_back(stores: Stores) -> None:
    seen: list[list[int]] = []

    def build(ids: list[int]) -> list[dict[str, Any]]:
        seen.append(ids)
        return [_job(job_id) for job_id in ids]

    assert await stores.jobs.last_id() == 0
    await stores.jobs.insert_new(2, build, 1)
    await stores.jobs.insert_new(1, build, 1)
    assert seen == [[1, 2], [3]] and await stores.jobs.last_id() == 3
    rows = await stores.jobs.fetch(None, ["status", "summary", "ops"])
    assert [(r["id"], r["summary"], r["ops"], r["archived"]) for r in rows] == [
        (1, ["OP_1"], [{"n": 1}], 0),
        (2, ["OP_2"], [{"n": 2}], 0),
        (3, ["OP_3"], [{"n": 3}], 0),
    ]
    assert await stores.jobs.unfinished_ids() == [1, 2, 3]


async def test_job_changes_logs_and_archive(stores: Stores) -> None:
    await stores.jobs.insert_new(3, lambda ids: [_job(i) for i in ids], 1)
    logs: list[ports.LogRow] = [(1, 0, 1, 2.0, "message", "one"), (1, 0, 2, 3.0, "message", "two")]
    await stores.jobs.write_batch([_job(1, "success", end=10.0), _job(2, "error", 20.0)], logs, 1)
    assert await stores.jobs.fetch_logs(1) == [
        (0, [1, 2.0, "message", "one"]),
        (0, [2, 3.0, "message", "two"]),
    ]
    assert await stores.jobs.fetch_logs(1, after=1) == [(0, [2, 3.0, "message", "two"])]
    assert await stores.jobs.finished_before(15.0) == [1]
    assert await stores.jobs.finished_before(None) == [1, 2]
    # Only finished jobs go to the archive.
    assert await stores.jobs.archive([1, 3], 1) == 1
    assert [r["id"] for r in await stores.jobs.fetch(None, ["status"])] == [2, 3]
    archived = await stores.jobs.fetch([1], ["status"], archived=True)
    assert [(r["id"], r["status"], r["archived"]) for r in archived] == [(1, "success", 1)]
    assert await stores.jobs.fetch_logs(1, archived=True) != []
    assert await stores.jobs.fetch_logs(1) == []


async def test_jobs_refuse_a_deposed_writer(stores: Stores) -> None:
    await stores.jobs.insert_new(1, lambda ids: [_job(i) for i in ids], 3)
    with pytest.raises(errors.JobQueueError, match="deposed"):
        await stores.jobs.write_batch([_job(1, "success", 1.0)], [], 2)
    with pytest.raises(errors.JobQueueError, match="deposed"):
        await stores.jobs.insert_new(1, lambda ids: [_job(i) for i in ids], 2)
    assert [r["status"] for r in await stores.jobs.fetch(None, ["status"])] == ["queued"]


# Small durable state
async def test_kv_versions_and_compare_and_set(stores: Stores) -> None:
    kv = stores.kv
    assert await kv.get("drain") is None
    first = await kv.put("drain", True, 1, expected=0)
    assert await kv.get("drain") == ports.Versioned(True, first)
    with pytest.raises(Conflict, match="version"):
        await kv.put("drain", False, 1, expected=0)  # exists already
    second = await kv.put("drain", False, 1, expected=first)
    assert second > first
    with pytest.raises(Conflict):
        await kv.put("drain", True, 1, expected=first)  # read before the last write
    with pytest.raises(Conflict):
        await kv.delete("drain", 1, expected=first)
    assert await kv.delete("drain", 1, expected=second) is True
    assert await kv.delete("drain", 1) is False and await kv.get("drain") is None


async def test_kv_scan_takes_prefixes_literally(stores: Stores) -> None:
    for key in ("intents/a%b", "intents/a_c", "intentsX", "tokens/1"):
        await stores.kv.put(key, {"key": key}, 1)
    assert sorted(await stores.kv.scan("intents/a%")) == ["intents/a%b"]
    assert sorted(await stores.kv.scan("intents/")) == ["intents/a%b", "intents/a_c"]
    assert (await stores.kv.scan("tokens/"))["tokens/1"].value == {"key": "tokens/1"}


async def test_kv_refuses_a_deposed_writer(stores: Stores) -> None:
    await stores.kv.put("k", 1, 9)
    with pytest.raises(FencedOut):
        await stores.kv.put("k", 2, 8)
    with pytest.raises(FencedOut):
        await stores.kv.delete("k", 8)
    kept = await stores.kv.get("k")
    assert kept is not None and kept.value == 1


# Mastership
async def test_leases_get_ever_newer_tokens(stores: Stores) -> None:
    first = await stores.mastership.acquire("node1", 30)
    assert (await stores.mastership.current()) == first
    renewed = await stores.mastership.renew(first, 60)
    assert renewed.token == first.token and renewed.expires > first.expires
    await stores.mastership.release(renewed)
    assert await stores.mastership.current() is None
    second = await stores.mastership.acquire("node2", 30)
    assert second.token > first.token
    with pytest.raises(LeaseLost):
        await stores.mastership.renew(first, 30)
    await stores.mastership.release(first)  # not current: nothing happens
    assert await stores.mastership.current() == second


async def test_a_new_master_fences_the_old_one_out(stores: Stores) -> None:
    old = await stores.mastership.acquire("node1", 30)
    if not stores.takeover:
        await stores.mastership.release(old)
    new = await stores.mastership.acquire("node2", 30)
    await stores.kv.put("k", "new", new.token)
    with pytest.raises(FencedOut):
        await stores.kv.put("k", "old", old.token)
    await stores.config.commit(node_change("n1", "node1", None), 2, new.token)
    with pytest.raises(FencedOut):
        await stores.config.commit(node_change("n2", "node2", None), 3, old.token)
    with pytest.raises(LeaseLost):
        await stores.mastership.renew(old, 30)
