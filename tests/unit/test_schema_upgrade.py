"""Schema versions of the SQLite stores: the data of a cluster made by the
code at 200d382 (tests/data/upgrade-200d382) upgraded and read, a backup
kept, a second open that does nothing, newer data refused, and a step that
fails leaving every old file as it was."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from corral import errors
from corral.paths import Paths
from corral.state import schema
from corral.state.backend import sqlite_files
from corral.state.ports import ConfigChange
from corral.state.sqlite.config import SqliteConfigStore
from corral.state.sqlite.jobs import SqliteJobStore
from corral.state.sqlite.kv import SqliteKeyValueStore

DATA = Path(__file__).resolve().parent.parent / "data" / "upgrade-200d382"
STORE_FILES = {"config.db": schema.CONFIG, "queue/queue.db": schema.JOBS}


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    """A root holding a copy of the 200d382 master's data directory."""
    made = Paths(tmp_path / "root")
    shutil.copytree(DATA, made.data_dir)
    return made


def contents(paths: Paths) -> dict[str, bytes]:
    """Every file of the data directory, by name, byte for byte."""
    return {
        str(f.relative_to(paths.data_dir)): f.read_bytes()
        for f in sorted(paths.data_dir.rglob("*"))
        if f.is_file()
    }


def version(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    finally:
        db.close()
    return int(row[0]) if row else 0


def test_the_200d382_data_has_no_version() -> None:
    for name in STORE_FILES:
        assert schema.read_version(DATA / name) == 0


async def test_the_200d382_data_upgraded_holds_the_cluster(paths: Paths) -> None:
    before = contents(paths)
    upgraded = schema.upgrade_files(sqlite_files(paths))
    assert upgraded == [(paths.config_db, 0), (paths.queue_db, 0)]  # no state.db at 200d382
    for name, store in STORE_FILES.items():
        assert version(paths.data_dir / name) == schema.current(store)
        backup = paths.data_dir / f"{name}.pre-upgrade-0"
        assert backup.read_bytes() == before[name]
    assert not list(paths.data_dir.rglob("*.upgrading*"))

    config = SqliteConfigStore(paths.config_db)
    try:
        snapshot = await config.load()
    finally:
        await config.close()
    (cluster,) = snapshot.tables["cluster"]
    assert (cluster["name"], cluster["tags"]) == ("cluster.example.com", ["upgrade-test"])
    assert sorted(n["name"] for n in snapshot.tables["nodes"]) == [
        "node1.example.com",
        "node2.example.com",
    ]
    (instance,) = snapshot.tables["instances"]
    assert (instance["name"], instance["tags"]) == ("inst1.example.com", ["web"])
    assert snapshot.serial == 5

    jobs = SqliteJobStore(paths.queue_db)
    try:
        rows = await jobs.fetch(None, ["status", "summary"], archived=True)
        assert await jobs.last_id() == 7
    finally:
        await jobs.close()
    assert [(r["id"], r["status"], r["archived"]) for r in rows] == [
        (1, "success", 1),
        *((job_id, "success", 0) for job_id in range(2, 8)),
    ]
    assert rows[4]["summary"] == ["INSTANCE_CREATE(inst1.example.com)"]


async def test_a_second_open_does_nothing(paths: Paths) -> None:
    schema.upgrade_files(sqlite_files(paths))
    once = contents(paths)
    assert schema.upgrade_files(sqlite_files(paths)) == []
    assert contents(paths) == once
    # The stores' own open finds them current too: no second backup, no new version.
    config = SqliteConfigStore(paths.config_db)
    await config.load()
    await config.close()
    assert sorted(p.name for p in paths.data_dir.glob("config.db.pre-upgrade-*")) == [
        "config.db.pre-upgrade-0"
    ]
    assert version(paths.config_db) == schema.current(schema.CONFIG)


def test_a_newer_version_is_refused_and_left_unchanged(paths: Paths) -> None:
    db = sqlite3.connect(paths.queue_db)
    db.execute("INSERT INTO meta VALUES ('schema_version', 99)")
    db.commit()
    db.close()
    before = contents(paths)
    with pytest.raises(errors.ConfigVersionMismatch) as refused:
        schema.upgrade_files(sqlite_files(paths))
    message = refused.value.message
    assert "\n" not in message
    assert f"{paths.queue_db} holds the job queue at schema version 99" in message
    assert f"newer than version {schema.current(schema.JOBS)} of Corral" in message
    assert "run the newer Corral, or restore" in message
    # All or nothing: the configuration, older and upgradable, is not upgraded either.
    assert contents(paths) == before
    with pytest.raises(errors.ConfigVersionMismatch):
        SqliteJobStore(paths.queue_db)
    assert contents(paths) == before


def test_a_step_that_fails_leaves_every_old_file_as_it_was(
    paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    def half_done(db: sqlite3.Connection) -> None:
        db.execute("DELETE FROM jobs")
        raise sqlite3.OperationalError("injected failure")

    failing = schema.Step("fails half-way", half_done, schema.UPGRADES[schema.JOBS][0].etcd)
    monkeypatch.setitem(schema.UPGRADES[schema.JOBS], 0, failing)
    before = contents(paths)
    with pytest.raises(errors.ConfigurationError) as failed:
        schema.upgrade_files(sqlite_files(paths))
    assert "Cannot upgrade the job queue" in failed.value.message
    assert "from schema version 0 to 1: OperationalError: injected failure" in failed.value.message
    # The configuration's own step worked, yet it stays as it was, with no backup.
    assert contents(paths) == before


def test_new_stores_carry_the_current_version(tmp_path: Path) -> None:
    SqliteConfigStore.create(tmp_path / "config.db", ConfigChange())
    assert version(tmp_path / "config.db") == schema.current(schema.CONFIG)
    SqliteJobStore.write_copy(tmp_path / "queue.db", [], [], 0, 1)
    assert version(tmp_path / "queue.db") == schema.current(schema.JOBS)


async def test_a_new_state_file_carries_the_current_version(tmp_path: Path) -> None:
    kv = SqliteKeyValueStore(tmp_path / "state.db")
    await kv.close()
    assert version(tmp_path / "state.db") == schema.current(schema.STATE)
    assert schema.upgrade_files([(tmp_path / "state.db", schema.STATE)]) == []


def test_what_a_crashed_daemon_left_in_the_write_ahead_log_is_upgraded_too(
    paths: Paths, tmp_path: Path
) -> None:
    # A commit that is in the log only, as a daemon killed before a checkpoint leaves it.
    live = sqlite3.connect(paths.config_db, isolation_level=None)
    live.execute("PRAGMA wal_autocheckpoint=0")
    live.execute("INSERT INTO meta VALUES ('left_in_the_log', 'yes')")
    crashed = Paths(tmp_path / "crashed")
    crashed.data_dir.mkdir(parents=True)
    for name in ("config.db", "config.db-wal"):
        shutil.copy2(paths.data_dir / name, crashed.data_dir / name)
    live.close()
    assert schema.upgrade_files([(crashed.config_db, schema.CONFIG)]) == [(crashed.config_db, 0)]
    for path in (crashed.config_db, schema.backup_path(crashed.config_db, 0)):
        db = sqlite3.connect(f"{path.as_uri()}?mode=ro&immutable=1", uri=True)
        row = db.execute("SELECT value FROM meta WHERE key = 'left_in_the_log'").fetchone()
        db.close()
        assert row == ("yes",), path
