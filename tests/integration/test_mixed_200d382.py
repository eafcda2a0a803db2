"""A node running the code of 200d382 beside a master running this code
(the cluster of tests/data/upgrade-200d382, node 2 on the old noded): what
corral.rpc.versions documents.  The master upgrades its stores and serves;
the old node answers the calls it shares with this code (the instance list);
gnt-cluster verify shows its version; a call it lacks, or takes otherwise,
fails naming both versions and the node to upgrade.

The old code comes from the repository's history (``git archive``); without
it (a checkout with no history) the test is skipped."""

from __future__ import annotations

import random
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from corral.paths import ROOT_ENV, Paths
from corral.process.daemons import start_daemon, stop_daemon
from corral.rpc import versions
from tests.helpers.cluster import TestCluster
from tests.helpers.noded import REPO_ROOT, daemon_env, free_port, noded_cmd

OLD = "200d382"
DATA = Path(__file__).resolve().parent.parent / "data" / "upgrade-200d382"
# What a node of 200d382 keeps of its cluster (the master's are the same files).
NODE_FILES = ("server.pem", "cluster-ca.pem", "client.pem", "cluster-domain-secret")
PRE_VERSIONS = "a Corral from before versioned node calls"
MASTER = f"Corral {versions.OWN.release} (node calls {versions.NODE_CALLS})"


@dataclass
class Mixed:
    master: TestCluster
    node2: Paths
    node2_ip: str


def old_code(target: Path) -> Path:
    """The ``corral`` package of 200d382 under ``target`` (skipped without history)."""
    found = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "cat-file", "-e", f"{OLD}^{{commit}}"],
        capture_output=True, check=False,
    )  # fmt: skip
    if found.returncode != 0:
        pytest.skip(f"commit {OLD} is not in this checkout's history")
    target.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", OLD, "corral"],
        capture_output=True, check=True,
    )  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


def relocate(config_db: Path, prefix: str, port: int) -> None:
    """Move the kept cluster to ``<prefix>.1`` and ``.2`` on ``port`` (two
    runs of the suite at once must not share addresses)."""
    db = sqlite3.connect(config_db)
    for name, address in (
        ("node1.example.com", f"{prefix}.1"),
        ("node2.example.com", f"{prefix}.2"),
    ):
        db.execute(
            "UPDATE nodes SET data = json_set(data, '$.primary_ip', ?, '$.secondary_ip', ?)"
            " WHERE name = ?",
            (address, address, name),
        )
    db.execute(
        "UPDATE cluster SET data = json_set(data, '$.master_ip', ?, '$.noded_port', ?)",
        (f"{prefix}.1", port),
    )
    db.commit()
    db.close()


@pytest.fixture
def mixed(tmp_path: Path) -> Iterator[Mixed]:
    old = old_code(tmp_path / "old")
    prefix = f"127.{random.randint(1, 254)}.{random.randint(1, 254)}"
    port = free_port(f"{prefix}.1")
    master = Paths(tmp_path / "node1")
    shutil.copytree(DATA, master.data_dir)
    master.socket_dir.mkdir(parents=True)
    relocate(master.config_db, prefix, port)
    node2 = Paths(tmp_path / "node2")
    node2.data_dir.mkdir(parents=True)
    for name in [*NODE_FILES, *(f.name for f in DATA.glob("ssconf_*"))]:
        shutil.copy2(DATA / name, node2.data_dir / name)
    cluster = TestCluster(master, f"{prefix}.1", port)
    try:
        # -P: the old code first on the path, not this directory's.
        old_env = {ROOT_ENV: str(node2.root), "PYTHONPATH": str(old)}
        start_daemon([sys.executable, "-P", "-m", "corral.daemons.noded", "-b", f"{prefix}.2",
                      "-p", str(port)], old_env)  # fmt: skip
        start_daemon(noded_cmd(f"{prefix}.1", port), daemon_env(master))
        start_daemon([sys.executable, "-m", "corral.daemons.masterd"], daemon_env(master))
        yield Mixed(cluster, node2, f"{prefix}.2")
    finally:
        stop_daemon(master, "corral-masterd")
        stop_daemon(master, "corral-noded")
        stop_daemon(node2, "corral-noded")


def test_an_old_node_beside_a_new_master(mixed: Mixed) -> None:
    cluster, old_ip = mixed.master, mixed.node2_ip
    listed = cluster.gnt("instance", "list", "--no-headers", "-o", "name,pnode,status")
    assert listed.stdout.split() == ["inst1.example.com", "node2.example.com", "ERROR_down"]

    verify = cluster.gnt("cluster", "verify")
    assert (
        "WARNING: node node2.example.com: software version mismatch: master"
        f" {versions.OWN.release}, node 0.1.0 (node calls: master {versions.NODE_CALLS}, node 0)"
    ) in verify.stdout, verify.stdout

    lacking = cluster.gnt("cluster", "command", "-n", "node2.example.com", "true")
    assert (
        f"Node {old_ip} runs {PRE_VERSIONS}, which cannot do run_command as the master"
        f" running {MASTER} asks (Unknown RPC call 'run_command');"
        f" upgrade node {old_ip}"
    ) in lacking.stdout, (lacking.stdout, lacking.stderr)

    start = cluster.gnt("instance", "start", "inst1.example.com")
    assert start.rc != 0
    assert f"(node {old_ip} runs {PRE_VERSIONS}, the master {MASTER})" in start.stderr, start.stderr
