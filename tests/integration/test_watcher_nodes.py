"""The watcher's pause reaches every node (Ganeti's set_watcher_pause call,
sent once the pause is committed): a node's watcher, which cannot ask
masterd, leaves its dead noded alone while the cluster's watcher is paused,
and starts it again once the pause ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from corral import testbed
from corral.process.daemons import running_pid
from tests.helpers.cluster import PERMISSIVE_IPOLICY
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.slow
NODED = "corral-noded"


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[testbed.Testbed]:
    running = testbed.up(tmp_path_factory.mktemp("wn"), nodes=2, init_args=PERMISSIVE_IPOLICY)
    try:
        yield running
    finally:
        running.down()


def _watcher(bed: testbed.Testbed, node: testbed.BedNode, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "corral.tools.watcher", "-d", *args],
        env={**os.environ, **bed.env(node)}, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def _kill_noded(node: testbed.BedNode) -> None:
    pid = running_pid(node.paths.pid_file(NODED))
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: running_pid(node.paths.pid_file(NODED)) is None, 30, "noded dead")


def _gnt_ok(bed: testbed.Testbed, *args: str) -> None:
    result = bed.gnt("cluster", *args)
    assert result.returncode == 0, result.stderr


def test_a_node_keeps_the_pause_and_its_watcher_waits(bed: testbed.Testbed) -> None:
    node2 = bed.nodes[1]
    seen = node2.paths.watcher_pause_seen
    _gnt_ok(bed, "watcher", "pause", "1h")
    wait_until(seen.exists, 30, "the pause on node2")  # sent after the answer
    assert float(seen.read_text()) > 0
    _kill_noded(node2)
    assert "Pause has been set, exiting" in _watcher(bed, node2)
    assert running_pid(node2.paths.pid_file(NODED)) is None
    _watcher(bed, node2, "--ignore-pause")
    assert running_pid(node2.paths.pid_file(NODED)) is not None
    _gnt_ok(bed, "watcher", "continue")
    wait_until(lambda: not seen.exists(), 30, "the pause gone from node2")
    _kill_noded(node2)
    _watcher(bed, node2)
    assert running_pid(node2.paths.pid_file(NODED)) is not None
