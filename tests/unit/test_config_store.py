"""Tests of the SQLite configuration store and the ConfigManager transactions."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import errors
from corral.config.manager import ConfigManager, ConfigTransaction, initial_change
from corral.nicesort import nice_sort
from corral.objects import Cluster, DetachedDisk, Disk, Node, NodeGroup
from corral.state.ports import ConfigChange
from corral.state.sqlite import config as sqlite_config
from corral.state.sqlite.config import SqliteConfigStore


def build_objects() -> tuple[Cluster, NodeGroup, Node, Node]:
    group = NodeGroup(name="default")
    master = Node(
        name="node1.example.com",
        primary_ip="192.0.2.1",
        secondary_ip="192.0.2.1",
        group=group.uuid,
    )
    other = Node(
        name="node2.example.com",
        primary_ip="192.0.2.2",
        secondary_ip="192.0.2.2",
        group=group.uuid,
    )
    cluster = Cluster(
        name="cluster.example.com",
        master_node=master.uuid,
        master_ip="192.0.2.100",
        tags=["initial"],
    )
    return cluster, group, master, other


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "config.db"


@pytest.fixture
def objects() -> tuple[Cluster, NodeGroup, Node, Node]:
    return build_objects()


@pytest.fixture
async def cfg(
    db_path: Path, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> AsyncIterator[ConfigManager]:
    SqliteConfigStore.create(db_path, initial_change(list(objects)))
    manager = await ConfigManager.open(SqliteConfigStore(db_path))
    yield manager
    await manager.close()


async def reopen(db_path: Path) -> ConfigManager:
    return await ConfigManager.open(SqliteConfigStore(db_path))


def disk_rows(db_path: Path, table: str) -> dict[str, tuple[str, int, float]]:
    """uuid -> (name, serial_no, mtime), read with a separate plain connection."""
    with sqlite3.connect(db_path) as db:
        rows = db.execute(f"SELECT uuid, name, serial_no, mtime FROM {table}").fetchall()
    return {uuid: (name, serial, mtime) for uuid, name, serial, mtime in rows}


def disk_serial(db_path: Path) -> int:
    with sqlite3.connect(db_path) as db:
        return int(db.execute("SELECT value FROM meta WHERE key = 'serial_no'").fetchone()[0])


# Create and load


async def test_create_and_load_round_trip(
    cfg: ConfigManager, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> None:
    cluster, group, master, other = objects
    assert cfg.serial == 1
    assert cfg.cluster == cluster
    assert cfg.groups() == [group]
    assert cfg.nodes() == [master, other]
    assert cfg.master_node == master
    assert cfg.get(Node, other.uuid) == other
    assert cfg.find(Node, "node2.example.com") == other
    assert cfg.find(NodeGroup, "default") == group
    assert cfg.find(Node, "default") is None  # name indexes are per table


async def test_reopened_store_sees_the_same_configuration(
    cfg: ConfigManager, db_path: Path, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> None:
    await cfg.close()
    again = await reopen(db_path)
    try:
        assert again.serial == 1
        assert again.cluster.model_dump() == objects[0].model_dump()
        assert [n.model_dump() for n in again.nodes()] == [
            objects[2].model_dump(),
            objects[3].model_dump(),
        ]
    finally:
        await again.close()


async def test_create_refuses_an_existing_file(cfg: ConfigManager, db_path: Path) -> None:
    with pytest.raises(errors.ConfigurationError, match="already exists"):
        SqliteConfigStore.create(db_path, ConfigChange())


async def test_store_uses_wal_mode(cfg: ConfigManager, db_path: Path) -> None:
    with sqlite3.connect(db_path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db_path.with_name(db_path.name + "-wal").exists()


async def test_store_load_returns_serial_and_rows(
    db_path: Path, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> None:
    SqliteConfigStore.create(db_path, initial_change(list(objects)))
    store = SqliteConfigStore(db_path)
    try:
        snapshot = await store.load()
        serial, tables = snapshot.serial, snapshot.tables
        assert serial == 1
        assert set(tables) == {
            "cluster",
            "nodegroups",
            "nodes",
            "instances",
            "networks",
            "filters",
            "disks",
        }
        assert sorted(row["name"] for row in tables["nodes"]) == [
            "node1.example.com",
            "node2.example.com",
        ]
        assert tables["instances"] == []
    finally:
        await store.close()


async def test_config_version_mismatch_is_refused(cfg: ConfigManager, db_path: Path) -> None:
    await cfg.close()
    with sqlite3.connect(db_path) as db:
        db.execute("UPDATE meta SET value = '2160000' WHERE key = 'config_version'")
    store = SqliteConfigStore(db_path)
    try:
        with pytest.raises(errors.ConfigVersionMismatch):
            await store.load()
    finally:
        await store.close()


async def test_a_configuration_from_before_detached_disks_loads(
    cfg: ConfigManager, db_path: Path
) -> None:
    """A store written before the ``disks`` table existed opens at the same
    version, with no detached disks, and takes them from then on."""
    await cfg.close()
    with sqlite3.connect(db_path) as db:
        db.execute("DROP TABLE disks")
    store = SqliteConfigStore(db_path)
    try:
        loaded = ConfigManager(store, await store.load())
        assert loaded.detached_disks() == []
        row = DetachedDisk.of(Disk(size=4, dev_type="file", logical_id=["loop", "/x"]))
        tx = loaded.transaction()
        tx.add(row)
        await tx.commit()
        assert [r.uuid for r in ConfigManager(store, await store.load()).detached_disks()] == [
            row.uuid
        ]
    finally:
        await store.close()


async def test_an_empty_database_is_not_a_configuration(tmp_path: Path) -> None:
    store = SqliteConfigStore(tmp_path / "empty.db")
    try:
        with pytest.raises(errors.ConfigVersionMismatch):
            await store.load()
    finally:
        await store.close()


async def test_a_configuration_without_cluster_is_refused(tmp_path: Path) -> None:
    _, group, _, _ = build_objects()
    SqliteConfigStore.create(tmp_path / "c.db", initial_change([group]))
    store = SqliteConfigStore(tmp_path / "c.db")
    with pytest.raises(errors.ConfigurationError, match="no cluster"):
        await ConfigManager.open(store)
    await store.close()


# Transactions


async def test_commit_bumps_object_serial_mtime_and_cluster_serial(
    cfg: ConfigManager, db_path: Path, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> None:
    _, _, master, other = objects
    old = cfg.get(Node, other.uuid)
    assert old is not None
    changed = old.copy_for_update()
    assert isinstance(changed, Node)
    changed.offline = True
    before = time.time()
    tx = cfg.transaction()
    tx.update(changed)
    assert tx.changed
    assert await tx.commit() is True

    now_node = cfg.get(Node, other.uuid)
    assert now_node is not None
    assert now_node.offline is True
    assert now_node.serial_no == 2
    assert now_node.mtime >= before
    assert now_node.ctime == old.ctime
    assert cfg.serial == 2
    # Objects outside the transaction are untouched.
    assert cfg.get(Node, master.uuid) == master
    assert cfg.get(Node, master.uuid).serial_no == 1  # type: ignore[union-attr]

    rows = disk_rows(db_path, "nodes")
    assert rows[other.uuid][1] == 2
    assert rows[other.uuid][2] == now_node.mtime
    assert rows[master.uuid][1] == 1
    assert disk_serial(db_path) == 2

    await cfg.close()
    again = await reopen(db_path)
    try:
        assert again.serial == 2
        assert again.get(Node, other.uuid) == now_node
    finally:
        await again.close()


async def test_each_commit_bumps_serials_again(cfg: ConfigManager, db_path: Path) -> None:
    for expected in (2, 3, 4):
        cluster = cfg.cluster.copy_for_update()
        cluster.tags.append(f"t{expected}")
        tx = cfg.transaction()
        tx.update(cluster)
        await tx.commit()
        assert cfg.serial == expected
        assert cfg.cluster.serial_no == expected
    assert cfg.cluster.tags == ["initial", "t2", "t3", "t4"]
    assert disk_serial(db_path) == 4


async def test_empty_transaction_commits_nothing(cfg: ConfigManager, db_path: Path) -> None:
    tx = cfg.transaction()
    assert not tx.changed
    assert await tx.commit() is False
    assert cfg.serial == 1
    assert disk_serial(db_path) == 1


async def test_a_transaction_commits_once(cfg: ConfigManager) -> None:
    tx = cfg.transaction()
    tx.update(cfg.cluster.copy_for_update())
    await tx.commit()
    with pytest.raises(errors.ProgrammerError):
        await tx.commit()


async def test_uncommitted_transaction_changes_nothing(
    cfg: ConfigManager, db_path: Path, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> None:
    _, group, master, other = objects
    tx = cfg.transaction()
    changed = cfg.cluster.copy_for_update()
    assert isinstance(changed, Cluster)
    changed.max_running_jobs = 3
    tx.update(changed)
    tx.add(Node(name="node3", primary_ip="192.0.2.3", secondary_ip="192.0.2.3", group=group.uuid))
    tx.remove(other)
    del tx

    assert cfg.cluster.max_running_jobs == C.DEFAULT_MAX_RUNNING_JOBS
    assert cfg.nodes() == [master, other]
    assert cfg.find(Node, "node3") is None
    assert cfg.serial == 1
    assert disk_serial(db_path) == 1
    assert set(disk_rows(db_path, "nodes")) == {master.uuid, other.uuid}


async def test_failed_commit_changes_nothing_in_memory_or_on_disk(
    cfg: ConfigManager, db_path: Path, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> None:
    cluster, _, _, other = objects
    good = cfg.cluster.copy_for_update()
    assert isinstance(good, Cluster)
    good.max_running_jobs = 3
    bad = other.copy_for_update()
    assert isinstance(bad, Node)
    bad.ndparams = {"unserializable": {1, 2}}  # JSON cannot store a set
    tx = cfg.transaction()
    tx.update(good)  # written first, then rolled back
    tx.update(bad)
    with pytest.raises(TypeError):
        await tx.commit()

    assert cfg.serial == 1
    assert cfg.cluster.max_running_jobs == C.DEFAULT_MAX_RUNNING_JOBS
    assert cfg.cluster.serial_no == 1
    assert cfg.get(Node, other.uuid) == other
    assert disk_serial(db_path) == 1
    assert disk_rows(db_path, "cluster")[cluster.uuid][1] == 1

    # The store is still usable after the rollback.
    retry = cfg.cluster.copy_for_update()
    assert isinstance(retry, Cluster)
    retry.max_running_jobs = 4
    tx2 = cfg.transaction()
    tx2.update(retry)
    await tx2.commit()
    await cfg.close()
    again = await reopen(db_path)
    try:
        assert again.serial == 2
        assert again.cluster.max_running_jobs == 4
        assert again.get(Node, other.uuid) == other
    finally:
        await again.close()


async def test_who_waits_for_a_transaction_learns_how_it_ended(
    cfg: ConfigManager, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> None:
    """After the commit has reached the store (not when it starts: an intent
    record dropped earlier could be lost with a failed commit), on a failure,
    or when the unit gives the transaction up."""
    ended: list[tuple[str, bool, int]] = []

    def watch(tx_name: str, tx: ConfigTransaction) -> None:
        tx.when_ended(lambda ok: ended.append((tx_name, ok, cfg.serial)))

    good = cfg.transaction()
    watch("good", good)
    good.update(cfg.cluster.copy_for_update())
    commit = asyncio.ensure_future(good.commit())
    await asyncio.sleep(0)  # the commit is under way in the store's thread
    assert ended == []
    await commit
    assert ended == [("good", True, 2)]

    bad = cfg.transaction()
    watch("bad", bad)
    broken = objects[3].copy_for_update()
    assert isinstance(broken, Node)
    broken.ndparams = {"unserializable": {1, 2}}
    bad.update(broken)
    with pytest.raises(TypeError):
        await bad.commit()
    given_up = cfg.transaction()
    watch("given up", given_up)
    given_up.abandon()
    given_up.abandon()
    assert ended[1:] == [("bad", False, 2), ("given up", False, 2)]


async def test_add_and_remove_objects(
    cfg: ConfigManager, db_path: Path, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> None:
    _, group, master, other = objects
    new = Node(name="node3", primary_ip="192.0.2.3", secondary_ip="192.0.2.3", group=group.uuid)
    tx = cfg.transaction()
    tx.add(new)
    tx.remove(other)
    await tx.commit()
    assert cfg.find(Node, "node3") == new
    assert new.serial_no == 1  # a new object keeps its first serial
    assert cfg.find(Node, other.name) is None
    assert cfg.get(Node, other.uuid) is None
    assert [n.name for n in cfg.nodes()] == ["node1.example.com", "node3"]
    assert set(disk_rows(db_path, "nodes")) == {master.uuid, new.uuid}


async def test_remove_then_update_in_one_transaction_keeps_memory_and_disk_in_step(
    cfg: ConfigManager, db_path: Path, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> None:
    other = objects[3]
    changed = other.copy_for_update()
    assert isinstance(changed, Node)
    changed.drained = True
    tx = cfg.transaction()
    tx.remove(other)
    tx.update(changed)  # the last staged action wins
    await tx.commit()
    in_memory = cfg.get(Node, other.uuid)
    assert in_memory is not None and in_memory.drained
    assert other.uuid in disk_rows(db_path, "nodes")
    await cfg.close()
    again = await reopen(db_path)
    try:
        assert again.get(Node, other.uuid) == in_memory
    finally:
        await again.close()


async def test_update_of_an_unknown_object_is_refused(cfg: ConfigManager) -> None:
    stranger = Node(name="x", primary_ip="1.1.1.1", secondary_ip="1.1.1.1", group="g")
    with pytest.raises(errors.ConfigurationError, match="unknown"):
        cfg.transaction().update(stranger)


async def test_adding_a_known_uuid_is_refused(
    cfg: ConfigManager, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> None:
    clone = objects[3].model_copy(update={"name": "node9"})
    with pytest.raises(errors.ConfigurationError, match="Duplicate uuid"):
        cfg.transaction().add(clone)


async def test_nice_names_stay_in_order_through_adds_renames_and_removes(
    cfg: ConfigManager,
) -> None:
    def check() -> None:
        # Ganeti's nice order; names it finds equal (a01, a001) by their text.
        names = sorted(g.name for g in cfg.groups())
        assert list(cfg.nice_names(NodeGroup)) == nice_sort(names)

    check()  # sorted once, then kept in order by each commit
    tx = cfg.transaction()
    for name in ("g10", "g9", "a01", "a1", "g1"):
        tx.add(NodeGroup(name=name))
    await tx.commit()
    check()
    assert list(cfg.nice_names(NodeGroup))[-3:] == ["g1", "g9", "g10"]
    renamed = cfg.lookup(NodeGroup, "g10").copy_for_update()
    renamed.name = "a001"
    tx = cfg.transaction()
    tx.update(renamed)
    tx.remove(cfg.lookup(NodeGroup, "a1"))
    await tx.commit()
    check()
    tagged = cfg.lookup(NodeGroup, "g9").copy_for_update()
    tagged.tags.append("no-rename")
    tx = cfg.transaction()
    tx.update(tagged)
    await tx.commit()
    check()


async def test_listeners_run_after_each_commit(cfg: ConfigManager) -> None:
    seen: list[tuple[int, set[str]]] = []
    cfg.add_listener(lambda c, tables: seen.append((c.serial, tables)))
    await cfg.transaction().commit()  # empty: no notification
    tx = cfg.transaction()
    tx.update(cfg.cluster.copy_for_update())
    await tx.commit()
    assert seen == [(2, {"cluster"})]


# Names


async def test_adding_a_used_name_is_already_exists(
    cfg: ConfigManager, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> None:
    group = objects[1]
    dup = Node(
        name="node1.example.com", primary_ip="192.0.2.9", secondary_ip="192.0.2.9", group=group.uuid
    )
    with pytest.raises(errors.OpPrereqError) as info:
        cfg.transaction().add(dup)
    assert info.value.ecode == C.ECODE_EXISTS
    assert info.value.args == ("The name 'node1.example.com' is already in use", "already_exists")


async def test_renaming_onto_a_used_name_is_already_exists(
    cfg: ConfigManager, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> None:
    renamed = objects[3].model_copy(update={"name": "node1.example.com"})
    with pytest.raises(errors.OpPrereqError) as info:
        cfg.transaction().update(renamed)
    assert info.value.ecode == C.ECODE_EXISTS


async def test_two_staged_objects_cannot_share_a_name(
    cfg: ConfigManager, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> None:
    group = objects[1]
    tx = cfg.transaction()
    tx.add(Node(name="n", primary_ip="1.0.0.1", secondary_ip="1.0.0.1", group=group.uuid))
    with pytest.raises(errors.OpPrereqError) as info:
        tx.add(Node(name="n", primary_ip="1.0.0.2", secondary_ip="1.0.0.2", group=group.uuid))
    assert info.value.ecode == C.ECODE_EXISTS


async def test_the_same_name_in_another_table_is_fine(cfg: ConfigManager) -> None:
    tx = cfg.transaction()
    tx.add(NodeGroup(name="node1.example.com"))
    await tx.commit()
    assert cfg.find(NodeGroup, "node1.example.com") is not None
    assert cfg.find(Node, "node1.example.com") is not None


async def test_a_removed_name_can_be_reused_in_the_same_transaction(
    cfg: ConfigManager, db_path: Path, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> None:
    group, other = objects[1], objects[3]
    replacement = Node(
        name=other.name, primary_ip="192.0.2.20", secondary_ip="192.0.2.20", group=group.uuid
    )
    tx = cfg.transaction()
    tx.remove(other)
    tx.add(replacement)
    await tx.commit()
    assert cfg.find(Node, other.name) == replacement
    assert cfg.get(Node, other.uuid) is None
    rows = disk_rows(db_path, "nodes")
    assert other.uuid not in rows
    assert rows[replacement.uuid][0] == other.name


async def test_rename_updates_the_name_index(
    cfg: ConfigManager, db_path: Path, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> None:
    other = objects[3]
    renamed = other.model_copy(update={"name": "renamed.example.com"}, deep=True)
    tx = cfg.transaction()
    tx.update(renamed)
    await tx.commit()
    assert cfg.find(Node, "renamed.example.com") == renamed
    assert cfg.find(Node, other.name) is None
    assert cfg.lookup(Node, "renamed.example.com").uuid == other.uuid
    with pytest.raises(errors.OpPrereqError) as info:
        cfg.lookup(Node, other.name)
    assert info.value.args == (f"Node '{other.name}' not known", C.ECODE_NOENT)
    # The old name is free again.
    tx = cfg.transaction()
    tx.add(Node(name=other.name, primary_ip="192.0.2.30", secondary_ip="192.0.2.30", group="g"))
    await tx.commit()
    assert disk_rows(db_path, "nodes")[other.uuid][0] == "renamed.example.com"
    await cfg.close()
    again = await reopen(db_path)
    try:
        assert again.find(Node, "renamed.example.com") is not None
        assert again.find(Node, other.name).uuid != other.uuid  # type: ignore[union-attr]
    finally:
        await again.close()


async def test_lookup_by_name_or_uuid(
    cfg: ConfigManager, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> None:
    group = objects[1]
    assert cfg.lookup(NodeGroup, "default") == group
    assert cfg.lookup(NodeGroup, group.uuid) == group
    with pytest.raises(errors.OpPrereqError, match="Node group 'nope' not known"):
        cfg.lookup(NodeGroup, "nope")


async def test_master_node_missing_is_a_configuration_error(tmp_path: Path) -> None:
    cluster, group, _, other = build_objects()
    SqliteConfigStore.create(tmp_path / "c.db", initial_change([cluster, group, other]))
    cfg = await ConfigManager.open(SqliteConfigStore(tmp_path / "c.db"))
    try:
        with pytest.raises(errors.ConfigurationError, match="master node"):
            _ = cfg.master_node
    finally:
        await cfg.close()


# Compare-and-set: a change based on what another transaction changed since is refused


def _state(cfg: ConfigManager, db_path: Path) -> tuple[int, dict[str, tuple[str, int, float]]]:
    return cfg.serial, disk_rows(db_path, "nodes")


async def test_an_update_read_before_another_commit_is_refused(
    cfg: ConfigManager, db_path: Path, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> None:
    other = objects[3]
    stale = cfg.get(Node, other.uuid).copy_for_update()  # type: ignore[union-attr]
    fresh = cfg.get(Node, other.uuid).copy_for_update()  # type: ignore[union-attr]
    fresh.tags = ["first"]
    tx = cfg.transaction()
    tx.update(fresh)
    await tx.commit()
    before = _state(cfg, db_path)
    stale.tags = ["second"]
    tx = cfg.transaction()
    tx.update(stale)
    with pytest.raises(errors.ConfigurationError, match="updated since it has been read"):
        await tx.commit()
    # Nothing of the refused change anywhere; the first one kept.
    assert _state(cfg, db_path) == before
    assert cfg.get(Node, other.uuid).tags == ["first"]  # type: ignore[union-attr]
    assert stale.serial_no == 1  # the refused copy is as it was read
    await cfg.close()
    assert (await reopen(db_path)).get(Node, other.uuid).tags == ["first"]  # type: ignore[union-attr]


async def test_a_removal_read_before_another_commit_is_refused(
    cfg: ConfigManager, db_path: Path, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> None:
    other = objects[3]
    stale = cfg.get(Node, other.uuid)
    assert stale is not None
    fresh = stale.copy_for_update()
    fresh.tags = ["kept"]
    tx = cfg.transaction()
    tx.update(fresh)
    await tx.commit()
    tx = cfg.transaction()
    tx.remove(stale)
    with pytest.raises(errors.ConfigurationError, match="updated since it has been read"):
        await tx.commit()
    assert cfg.get(Node, other.uuid) is not None
    assert other.uuid in disk_rows(db_path, "nodes")


async def test_the_store_refuses_a_change_whose_reads_are_stale(
    cfg: ConfigManager, db_path: Path, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> None:
    """The store itself compares (another backend must too): the serial a row
    was read at, a row that must not exist yet, and the cluster serial."""
    other = objects[3]
    store = SqliteConfigStore(db_path)
    try:
        row = {**other.model_dump(), "tags": ["x"], "serial_no": 2}
        wrong_row = ConfigChange(upserts={"nodes": [row]}, expected={"nodes": {other.uuid: 7}})
        with pytest.raises(errors.ConfigurationError, match="at serial 1, the change read 7"):
            await store.commit(wrong_row, cfg.serial + 1, 0)
        exists = ConfigChange(upserts={"nodes": [row]}, expected={"nodes": {other.uuid: None}})
        with pytest.raises(errors.ConfigurationError, match="at serial 1, the change read None"):
            await store.commit(exists, cfg.serial + 1, 0)
        right = ConfigChange(upserts={"nodes": [row]}, expected={"nodes": {other.uuid: 1}})
        with pytest.raises(errors.ConfigurationError, match="another process wrote it"):
            await store.commit(right, cfg.serial + 2, 0)
        assert disk_rows(db_path, "nodes")[other.uuid][1] == 1
        await store.commit(right, cfg.serial + 1, 0)
        assert disk_rows(db_path, "nodes")[other.uuid][1] == 2
    finally:
        await store.close()


async def test_commits_that_come_together_are_written_together(
    cfg: ConfigManager, db_path: Path, objects: tuple[Cluster, NodeGroup, Node, Node]
) -> None:
    """Group commit: while one commit is in the store, the others wait and go
    in one write after it; one that cannot be stored fails alone."""
    _, group, master, other = objects
    store = cfg._store
    writes: list[int] = []
    commit_many = store.commit_many

    async def counted(changes: Any, serial: int, fence: int) -> list[Exception | None]:
        writes.append(len(changes))
        return await commit_many(changes, serial, fence)

    store.commit_many = counted  # type: ignore[method-assign]
    transactions = []
    for index, tag in enumerate(f"tag{i}" for i in range(5)):
        obj = (group if index == 3 else master if index == 1 else other).copy_for_update()
        assert isinstance(obj, NodeGroup | Node)
        obj.tags = [tag]
        if index == 3:
            obj.ndparams = {"unserializable": {1, 2}}  # JSON cannot store a set
        tx = cfg.transaction()
        tx.update(obj)
        transactions.append(tx)
    # The first node change is written alone; while it is, the others queue.
    # tag2 and tag4 change what tag0 changed in the meantime (a Conflict), tag3
    # cannot be stored: each fails alone, tag1 (the master node) is written.
    outcomes = await asyncio.gather(*(tx.commit() for tx in transactions), return_exceptions=True)
    assert writes == [1, 4]
    assert outcomes[0] is True and outcomes[1] is True
    assert "the change read" in str(outcomes[2]) and "the change read" in str(outcomes[4])
    assert isinstance(outcomes[3], TypeError)
    assert cfg.serial == 3 == disk_serial(db_path)
    assert cfg.get(Node, other.uuid).tags == ["tag0"]  # type: ignore[union-attr]
    assert cfg.get(Node, master.uuid).tags == ["tag1"]  # type: ignore[union-attr]


async def test_a_job_killed_during_its_commit_leaves_memory_as_the_disk(
    cfg: ConfigManager, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gnt-job cancel --kill`` of a job whose change is in the store's
    thread: the write goes on there whatever the job, so memory must show
    what the disk holds (else every later commit is refused as a conflict
    until masterd restarts)."""
    in_store, go_on = threading.Event(), threading.Event()
    commit_many = sqlite_config._commit_many

    def held(*args: Any) -> list[Exception | None]:
        in_store.set()
        go_on.wait(30)
        return commit_many(*args)

    monkeypatch.setattr(sqlite_config, "_commit_many", held)
    cluster = cfg.cluster.copy_for_update()
    assert isinstance(cluster, Cluster)
    cluster.tags = ["killed"]
    tx = cfg.transaction()
    tx.update(cluster)
    job = asyncio.create_task(tx.commit())
    await asyncio.to_thread(in_store.wait, 30)
    job.cancel()
    await asyncio.sleep(0)  # the cancellation reaches the job
    go_on.set()
    with pytest.raises(asyncio.CancelledError):
        await job
    assert cfg.serial == 2 == disk_serial(db_path)
    assert cfg.cluster.tags == ["killed"]
    again = cfg.cluster.copy_for_update()
    assert isinstance(again, Cluster)
    again.tags = ["after"]
    tx2 = cfg.transaction()
    tx2.update(again)
    assert await tx2.commit()
    assert cfg.serial == 3 == disk_serial(db_path)
