"""The N-node test bed, and the cluster files on every node: ssconf kept the
same everywhere, getmaster on any node, redist-conf repairing a node."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral import testbed
from corral.paths import Paths
from corral.process.daemons import running_pid
from tests.helpers.noded import daemon_env
from tests.helpers.waiting import wait_until


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[testbed.Testbed]:
    root = tmp_path_factory.mktemp("bed")
    running = testbed.up(root, nodes=5)
    try:
        yield running
    finally:
        running.down()


def gone(pid: int) -> bool:
    return not os.path.exists(f"/proc/{pid}")


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (result.stdout, result.stderr)
    return result.stdout


def ssconf(bed: testbed.Testbed) -> list[dict[str, str]]:
    """Every node's ssconf files, name → content."""
    return [
        {f.name: f.read_text() for f in sorted(n.paths.data_dir.glob("ssconf_*"))}
        for n in bed.nodes
    ]


def test_five_nodes_listed(bed: testbed.Testbed) -> None:
    out = ok(bed.gnt("node", "list", "--no-headers", "-o", "name,pip"))
    assert [line.split() for line in out.splitlines()] == [[n.name, n.address] for n in bed.nodes]
    assert len({n.address for n in bed.nodes}) == 5


def test_join_tokens_never_on_a_command_line(bed: testbed.Testbed) -> None:
    for node in bed.nodes[1:]:
        pid = running_pid(node.paths.pid_file("corral-noded"))
        assert pid is not None
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert b"--join-token-file" in argv and not any(b"cj1." in arg for arg in argv), argv
        # The file it was given is gone; noded's own copy went with the join.
        assert not list(node.paths.root.glob(".join-token-*"))


def test_ssconf_identical_on_all_nodes_after_a_change(bed: testbed.Testbed) -> None:
    ok(bed.gnt("cluster", "add-tags", "bedtag"))
    try:
        wait_until(
            lambda: all(files == ssconf(bed)[0] for files in ssconf(bed)),
            timeout=30,
            what="the same ssconf files on every node",
        )
        assert ssconf(bed)[4]["ssconf_cluster_tags"] == "bedtag\n"
        assert ssconf(bed)[2]["ssconf_node_list"] == "".join(f"{n.name}\n" for n in bed.nodes)
    finally:
        ok(bed.gnt("cluster", "remove-tags", "bedtag"))


def test_getmaster_on_a_node_that_is_not_the_master(bed: testbed.Testbed) -> None:
    node = bed.nodes[3]
    assert not node.paths.config_db.exists()
    assert ok(bed.gnt("cluster", "getmaster", node=node)) == f"{bed.master.name}\n"


def test_redist_conf_repairs_a_node(bed: testbed.Testbed) -> None:
    node = bed.nodes[1]
    node.paths.ssconf_file("master_node").unlink()
    node.paths.cluster_domain_secret.write_text("tampered\n")
    ok(bed.gnt("cluster", "redist-conf"))
    assert node.paths.ssconf_file("master_node").read_text() == f"{bed.master.name}\n"
    assert (
        node.paths.cluster_domain_secret.read_bytes()
        == bed.master.paths.cluster_domain_secret.read_bytes()
    )


def test_master_ping(bed: testbed.Testbed) -> None:
    assert bed.gnt("cluster", "master-ping").returncode == 0
    assert bed.gnt("cluster", "master-ping", node=bed.nodes[1]).returncode == 1


def test_command_line_up_and_down_leave_no_process(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    root = tmp_path_factory.mktemp("bed")  # short: unix socket paths stay within 107 bytes
    env = {**os.environ, **daemon_env(Paths(root))}
    cmd = [sys.executable, "-m", "corral.testbed"]
    try:
        out = subprocess.run(
            [*cmd, "up", "--nodes", "2", "--root", str(root)],
            env=env, capture_output=True, text=True, check=True, timeout=300,
        ).stdout  # fmt: skip
        assert [line.split()[0] for line in out.splitlines()] == [
            "node1.example.com", "node2.example.com",
        ]  # fmt: skip
        pids = [
            running_pid(Paths(root / node).pid_file(daemon))
            for node in ("node1", "node2")
            for daemon in testbed.DAEMONS
        ]
        assert sum(pid is not None for pid in pids) == 4  # 2 nodeds, masterd, rapi
    finally:
        subprocess.run([*cmd, "down", "--root", str(root)], env=env, check=True, timeout=120)
    for pid in pids:
        if pid is not None:
            wait_until(functools.partial(gone, pid), what=f"pid {pid} gone")
