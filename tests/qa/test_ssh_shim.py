"""The ssh shim of the QA harness: the suite's own ssh command lines, a node's view."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.qa import ssh_shim
from tests.qa.harness import Nodes, write_machine

# As qa_utils.GetSSHCommand builds them (multiplexer, agent forwarding, tty).
QA_OPTIONS = [
    "-oEscapeChar=none", "-oBatchMode=yes", "-lroot", "-t", "-oStrictHostKeyChecking=yes",
    "-oClearAllForwardings=yes", "-oForwardAgent=yes", "-oControlPath=/tmp/mux",
    "-oControlMaster=no",
]  # fmt: skip


def test_parses_the_suites_command_lines() -> None:
    assert ssh_shim.parse([*QA_OPTIONS, "node1", "gnt-node list"]) == (
        "node1", "gnt-node list", {"t"}
    )  # fmt: skip
    assert ssh_shim.parse(["-l", "root", "-p", "22", "node2", "echo", "a b"])[:2] == (
        "node2", "echo a b"
    )  # fmt: skip
    assert ssh_shim.parse(["-N", "-oControlMaster=yes", "node1"]) == ("node1", None, {"N"})
    assert ssh_shim.parse(["--", "node1", "exit"])[:2] == ("node1", "exit")


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """Two nodes, each a root with a file in its /var/lib/ganeti (per-command
    namespaces: the work directory may be under /tmp)."""
    nodes: Nodes = {}
    for k in (1, 2):
        root = tmp_path / f"root{k}"
        (root / "var/lib/ganeti").mkdir(parents=True)
        (root / "var/lib/ganeti/ssconf_cluster_name").write_text(f"cluster{k}\n")
        nodes[f"node{k}.example.com"] = {"root": str(root)}
    env = write_machine(tmp_path, nodes)
    (tmp_path / "env").write_text(env[ssh_shim.MACHINE_ENV])
    return tmp_path


def ssh(work: Path, *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {ssh_shim.MACHINE_ENV: (work / "env").read_text(), "PATH": ssh_shim.SYSTEM_PATH}
    return subprocess.run(
        [str(work / "bin/ssh"), *argv], env=env, input=stdin, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip


def test_a_command_runs_in_the_nodes_view_and_is_logged(work: Path) -> None:
    script = "hostname; cat /var/lib/ganeti/ssconf_cluster_name; gnt-cluster --version; exit 3"
    result = ssh(work, *QA_OPTIONS, "node2.example.com", script)
    assert result.returncode == 3, result.stderr
    assert result.stdout.splitlines()[:2] == ["node2.example.com", "cluster2"]
    assert "corral" in result.stdout.splitlines()[2]  # Corral's gnt-cluster
    log = (work / "ssh.log").read_text()
    assert f"node2.example.com $ {script}" in log and "rc=3" in log


def test_standard_input_reaches_the_command(work: Path) -> None:
    result = ssh(work, "node1.example.com", "cat > /var/lib/ganeti/up && echo done", stdin="x\n")
    assert result.stdout == "done\n"
    assert (work / "root1/var/lib/ganeti/up").read_text() == "x\n"


def test_scp_from_a_node_copies_a_directory_to_another(work: Path) -> None:
    make = (
        "mkdir -p /srv/ganeti/file-storage/inst1 && echo data > /srv/ganeti/file-storage/inst1/d0"
    )
    copy = (
        "scp -oGlobalKnownHostsFile=/var/lib/ganeti/known_hosts -oCheckHostIp=no -r"
        " /srv/ganeti/file-storage/inst1 node2.example.com:/srv/ganeti/file-storage"
    )
    assert ssh(work, "node1.example.com", make).returncode == 0
    assert not (work / "root2/srv/ganeti/file-storage").exists()
    assert ssh(work, "node2.example.com", "mkdir -p /srv/ganeti/file-storage").returncode == 0
    result = ssh(work, "node1.example.com", copy)
    assert result.returncode == 0, result.stderr
    assert (work / "root2/srv/ganeti/file-storage/inst1/d0").read_text() == "data\n"
    assert os.path.getsize(work / "root1/srv/ganeti/file-storage/inst1/d0") == 5


def test_an_unknown_node_is_ssh_s_error(work: Path) -> None:
    result = ssh(work, "node9.example.com", "true")
    assert result.returncode == 255
    assert "Could not resolve hostname node9.example.com" in result.stderr
