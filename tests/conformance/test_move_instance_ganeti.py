"""Ganeti 3.0.2's own move-instance (Debian's package, run with the system
Python as the other conformance tests run Ganeti's code) moves an instance
between two Corral clusters through their RAPI, checking each cluster's
certificate; and Corral's move-instance refuses bad options as Ganeti's does.

Ganeti's tool (under Python 3) compares ``--opportunistic-tries`` with 0 even
when it is not given, so the tests always give it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance.ganeti import SYSTEM_PYTHON
from tests.helpers.cluster import Result
from tests.helpers.two_clusters import add_instance, disk_file, move_args, two_clusters

NAME = "localhost"  # the destination resolves instance names, as Ganeti's does
MIB = 1024 * 1024


def ganeti_move(tree: Path, argv: list[str]) -> Result:
    """Ganeti's move-instance with ``argv``."""
    proc = subprocess.run(
        [SYSTEM_PYTHON, str(tree / "move-instance"), *argv],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree), "LANG": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def corral_move(argv: list[str]) -> Result:
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "move-instance"), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.slow
def test_ganeti_tool_moves_between_corral_clusters(ganeti: Path, tmp_path: Path) -> None:
    with two_clusters(tmp_path) as (src, dest):
        data = os.urandom(2 * MIB + 4321)
        add_instance(src, NAME, data)
        argv = ["-v", "--opportunistic-tries=0", *move_args(src, dest, tmp_path),
                src.node_ip, dest.node_ip, NAME]  # fmt: skip
        result = ganeti_move(ganeti, argv)
        assert result.rc == 0, result.stderr
        assert f"{NAME}: Success" in result.stderr
        assert src.gnt("instance", "list", "--no-headers", "-o", "name").stdout == ""
        assert dest.gnt("instance", "list", "--no-headers", "-o", "name").stdout == f"{NAME}\n"
        assert disk_file(dest, NAME).read_bytes()[: len(data)] == data

        # Back, but trusting the wrong certificate for the destination (the
        # source's): refused before anything moves.
        back = [a for a in move_args(dest, src, tmp_path) if not a.startswith("--dest-ca-file")]
        argv = ["--opportunistic-tries=0", *back, f"--dest-ca-file={dest.rapi_ca}",
                dest.node_ip, src.node_ip, NAME]  # fmt: skip
        result = ganeti_move(ganeti, argv)
        assert result.rc != 0
        assert "certificate" in result.stderr.lower(), result.stderr
        assert dest.gnt("instance", "list", "--no-headers", "-o", "name").stdout == f"{NAME}\n"
        assert src.gnt("instance", "list", "--no-headers", "-o", "name").stdout == ""


@pytest.mark.slow
def test_ganeti_tool_creates_opportunistically(ganeti: Path, tmp_path: Path) -> None:
    """With an allocator and --opportunistic-tries, Ganeti's tool creates the
    instance with opportunistic_locking set, which the destination takes."""
    with two_clusters(tmp_path) as (src, dest):
        data = os.urandom(MIB)
        add_instance(src, NAME, data)
        connection = [a for a in move_args(src, dest, tmp_path) if "primary-node" not in a]
        argv = ["-I", "hail", "--opportunistic-tries=1", *connection,
                src.node_ip, dest.node_ip, NAME]  # fmt: skip
        result = ganeti_move(ganeti, argv)
        assert result.rc == 0, result.stderr
        assert dest.gnt("instance", "list", "--no-headers", "-o", "name").stdout == f"{NAME}\n"
        with dest.client() as client:
            jobs = client.query_jobs(None, ["ops"])
        [create] = [op for [ops] in jobs for op in ops if op["OP_ID"] == "OP_INSTANCE_CREATE"]
        assert create["opportunistic_locking"] is True and create["iallocator"] == "hail"
        assert disk_file(dest, NAME).read_bytes()[: len(data)] == data


USAGE_ERRORS = [
    [],
    ["a", "b"],
    ["a", "b", "c"],
    ["--src-ca-file=/etc/hostname", "--opportunistic-tries=0", "--parallel=0", "a", "b", "c"],
    ["--src-ca-file=/etc/hostname", "--opportunistic-tries=2", "a", "b", "c"],
    ["--src-ca-file=/etc/hostname", "--opportunistic-tries=-1", "-I", "hail", "a", "b", "c"],
    ["--src-ca-file=/etc/hostname", "--opportunistic-delay=3", "-I", "hail", "a", "b", "c"],
    ["--src-ca-file=/etc/hostname", "--opportunistic-tries=1", "--opportunistic-delay=0",
     "-I", "hail", "a", "b", "c"],
    ["--src-ca-file=/etc/hostname", "--opportunistic-tries=0", "-I", "hail",
     "--dest-primary-node=n1", "a", "b", "c"],
]  # fmt: skip
# (Ganeti's tool crashes on per-instance options with several instances:
# tests/unit/test_move_instance.py checks Corral's refusal.)


@pytest.mark.parametrize("argv", USAGE_ERRORS)
def test_usage_errors_as_ganeti(ganeti: Path, argv: list[str]) -> None:
    theirs = ganeti_move(ganeti, argv)
    ours = corral_move(argv)
    assert (ours.rc, ours.stdout, ours.stderr) == (theirs.rc, theirs.stdout, theirs.stderr)


@pytest.mark.slow
def test_ganeti_tool_refused_across_domain_secrets(ganeti: Path, tmp_path: Path) -> None:
    """Clusters with different domain secrets: the destination refuses the
    source's handshake; the instance stays where it is, the destination gets none."""
    with two_clusters(tmp_path, same_secret=False) as (src, dest):
        data = os.urandom(MIB)
        add_instance(src, NAME, data)
        argv = ["--opportunistic-tries=0", *move_args(src, dest, tmp_path),
                src.node_ip, dest.node_ip, NAME]  # fmt: skip
        result = ganeti_move(ganeti, argv)
        assert result.rc == 1
        assert "handshake" in result.stderr.lower(), result.stderr
        assert src.gnt("instance", "list", "--no-headers", "-o", "name").stdout == f"{NAME}\n"
        assert dest.gnt("instance", "list", "--no-headers", "-o", "name").stdout == ""
        assert disk_file(src, NAME).read_bytes()[: len(data)] == data
