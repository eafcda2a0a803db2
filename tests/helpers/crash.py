"""Daemons killed on purpose (kill -9) and started again, the fake
hypervisor's gates that hold a step until then, the records of operations
under way (:mod:`corral.cmdlib.intents`), and what ``gnt-cluster verify``
finds afterwards."""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

from corral.cmdlib.intents import PREFIX
from corral.node.hypervisor.fake import GATES_DIR
from corral.paths import Paths
from corral.process.daemons import running_pid, start_daemon
from tests.helpers.cluster import TestCluster
from tests.helpers.offline_config import durable_values
from tests.helpers.waiting import wait_until

MASTERD = "corral-masterd"
UNCLEAN_SHUTDOWN = "Unclean master daemon shutdown"
# Each verify feedback line starts with its time (ctime layout).
STAMP = re.compile(r"^\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4} ")


def _gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def kill_9(pid_file: Path) -> None:
    """SIGKILL the daemon of ``pid_file`` and wait until it is gone."""
    pid = running_pid(pid_file)
    assert pid is not None, f"{pid_file.name}: not running"
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: _gone(pid), timeout=15, what=f"process {pid} gone")


def start_masterd(cl: TestCluster, *options: str) -> None:
    """Start masterd with its command-line ``options``; once it is ready."""
    start_daemon([sys.executable, "-m", "corral.daemons.masterd", *options], cl.env, timeout=30)


def arm_hv_gate(paths: Paths, instance: str, step: str) -> Path:
    """Stop the fake hypervisor's ``step`` for ``instance`` on the node rooted
    at ``paths`` (see corral.node.hypervisor.fake); the gate file, whose
    removal lets the step go on."""
    gate = paths.run_dir / GATES_DIR / f"{instance}.{step}"
    gate.parent.mkdir(parents=True, exist_ok=True)
    gate.touch()
    return gate


def wait_reached(gate: Path) -> None:
    """Until the step of ``gate`` waits at it."""
    reached = gate.with_name(gate.name + ".reached")
    wait_until(reached.exists, timeout=30, what=f"{reached}")


def intent_records(cl: TestCluster) -> list[str]:
    """The keys of the master's records of operations under way or interrupted."""
    return list(durable_values(cl.paths, PREFIX))


def verify_findings(cl: TestCluster) -> tuple[int, list[str]]:
    """``gnt-cluster verify --error-codes``: its exit code and its ERROR and
    WARNING lines, times dropped (Ganeti's NOTICE lines are no findings)."""
    result = cl.gnt("cluster", "verify", "--error-codes")
    assert "Traceback" not in result.stderr, result.stderr
    lines = [STAMP.sub("", line).strip() for line in result.stdout.splitlines()]
    return result.rc, [x for x in lines if x.startswith(("- ERROR", "- WARNING"))]
