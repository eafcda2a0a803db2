"""The ssh shim of the QA harness: the suite's own ssh command lines, a node's view."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conformance.ganeti import SYSTEM_PYTHON
from tests.qa import ssh_shim

HERE = Path(__file__).resolve().parent
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


def shim(work: Path, *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SYSTEM_PYTHON, "-I", "-S", str(HERE / "ssh_shim.py"), *argv],
        env={ssh_shim.MACHINE_ENV: str(work / "machine.json"), "PATH": ssh_shim.SYSTEM_PATH},
        input=stdin, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A node whose root holds a file in its /var/lib/ganeti, and a gnt-* on its PATH."""
    root = tmp_path / "root1"
    (root / "var/lib/ganeti").mkdir(parents=True)
    (root / "var/lib/ganeti/ssconf_cluster_name").write_text("cluster.example.com\n")
    bindir = tmp_path / "node-bin"
    bindir.mkdir()
    (bindir / "gnt-cluster").write_text('#!/bin/sh\necho corral gnt-cluster "$@"\n')
    (bindir / "gnt-cluster").chmod(0o755)
    machine = {"nodes": {"node1.example.com": {"root": str(root)}}, "path": str(bindir),
               "log": str(tmp_path / "ssh.log")}  # fmt: skip
    (tmp_path / "machine.json").write_text(json.dumps(machine))
    return tmp_path


def test_a_command_runs_in_the_nodes_view_and_is_logged(work: Path) -> None:
    script = "hostname; cat /var/lib/ganeti/ssconf_cluster_name; gnt-cluster info; exit 3"
    result = shim(work, *QA_OPTIONS, "node1.example.com", script)
    assert result.returncode == 3
    assert result.stdout.splitlines() == [
        "node1.example.com", "cluster.example.com", "corral gnt-cluster info"
    ]  # fmt: skip
    log = (work / "ssh.log").read_text()
    assert f"node1.example.com $ {script}" in log and "rc=3" in log


def test_standard_input_reaches_the_command(work: Path) -> None:
    result = shim(work, "node1.example.com", "cat > /var/lib/ganeti/up && echo done", stdin="x\n")
    assert result.stdout == "done\n"
    assert (work / "root1/var/lib/ganeti/up").read_text() == "x\n"


def test_an_unknown_node_is_ssh_s_error(work: Path) -> None:
    result = shim(work, "node9.example.com", "true")
    assert result.returncode == 255
    assert "Could not resolve hostname node9.example.com" in result.stderr
