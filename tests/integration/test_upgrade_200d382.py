"""masterd started on the data of a cluster made by the code at 200d382
(tests/data/upgrade-200d382): it upgrades the stores, keeps the old files
beside them and serves the cluster, its instance, jobs and tags; started
again it upgrades nothing; on data of a newer schema it does not start, says
why in one line, and leaves the files as they were."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import corral
from corral.paths import Paths
from corral.process.daemons import stop_daemon
from corral.state import schema
from tests.helpers.cluster import TestCluster

DATA = Path(__file__).resolve().parent.parent / "data" / "upgrade-200d382"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[TestCluster]:
    """A root holding a copy of the 200d382 master's data directory."""
    paths = Paths(tmp_path / "root")
    shutil.copytree(DATA, paths.data_dir)
    # What the system makes at boot (a tmpfs): the data directory is what was kept.
    paths.socket_dir.mkdir(parents=True)
    made = TestCluster(paths, "127.67.215.1", 47661)
    try:
        yield made
    finally:
        stop_daemon(paths, "corral-masterd")


def start_masterd(cluster: TestCluster) -> subprocess.CompletedProcess[str]:
    """Start masterd (it returns once it serves, or failed to start)."""
    return subprocess.run(
        [sys.executable, "-m", "corral.daemons.masterd"],
        env=cluster.env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def out(cluster: TestCluster, command: str, *args: str) -> list[list[str]]:
    result = cluster.gnt(command, *args)
    assert result.rc == 0, (result.stdout, result.stderr)
    return [line.split() for line in result.stdout.splitlines()]


def test_masterd_upgrades_and_serves_the_200d382_cluster(cluster: TestCluster) -> None:
    data = cluster.paths.data_dir
    old = {name: (data / name).read_bytes() for name in ("config.db", "queue/queue.db")}
    started = start_masterd(cluster)
    assert started.returncode == 0, started.stderr
    for name, content in old.items():
        assert (data / f"{name}.pre-upgrade-0").read_bytes() == content
    assert out(cluster, "cluster", "list-tags") == [["upgrade-test"]]
    assert out(cluster, "instance", "list", "--no-headers", "-o", "name,os,pnode,tags") == [
        ["inst1.example.com", "plain", "node2.example.com", "web"]
    ]
    assert out(cluster, "node", "list", "--no-headers", "-o", "name,pinst_cnt") == [
        ["node1.example.com", "0"],
        ["node2.example.com", "1"],
    ]
    jobs = out(cluster, "job", "list", "--no-headers", "-o", "id,status,summary")
    assert [row[:2] for row in jobs] == [[str(n), "success"] for n in range(2, 8)]
    assert jobs[3][2] == "INSTANCE_CREATE(inst1.example.com)"
    archived = cluster.gnt("job", "info", "1")
    assert "OP_CLUSTER_POST_INIT" in archived.stdout, archived.stderr

    # Started again: the stores are current, nothing is upgraded or backed up again.
    stop_daemon(cluster.paths, "corral-masterd")
    backups = {p: p.stat().st_mtime_ns for p in data.rglob("*.pre-upgrade-*")}
    assert len(backups) == 2
    assert start_masterd(cluster).returncode == 0
    assert {p: p.stat().st_mtime_ns for p in data.rglob("*.pre-upgrade-*")} == backups
    assert out(cluster, "cluster", "list-tags") == [["upgrade-test"]]
    log = (cluster.paths.log_dir / "corral-masterd.log").read_text()
    assert log.count("Upgraded the configuration") == 1


def test_masterd_refuses_data_of_a_newer_schema(cluster: TestCluster) -> None:
    data = cluster.paths.data_dir
    newer = schema.current(schema.CONFIG) + 1
    db = sqlite3.connect(data / "config.db")
    db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(newer),))
    db.commit()
    db.close()
    before = {p: p.read_bytes() for p in data.rglob("*") if p.is_file()}
    started = start_masterd(cluster)
    assert started.returncode == 1
    assert started.stderr.strip() == (
        f"{data / 'config.db'} holds the configuration at schema version {newer}, newer"
        f" than version {newer - 1} of Corral {corral.__version__}: run the newer"
        f" Corral, or restore {data / 'config.db'}.pre-upgrade-{newer - 1}"
    )
    assert {p: p.read_bytes() for p in before} == before
    assert not list(data.rglob("*.pre-upgrade-*"))
    assert not cluster.paths.state_db.exists()
