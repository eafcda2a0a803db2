"""Hooks and a node known to be unreachable: as in Ganeti its hooks are
skipped with a warning, and the operation does not wait for it again."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from corral import testbed
from corral.process.daemons import running_pid

pytestmark = pytest.mark.slow


@pytest.fixture
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[testbed.Testbed]:
    # A short root: unix socket paths under it must stay within 107 bytes.
    running = testbed.up(tmp_path_factory.mktemp("bed"), nodes=3)
    try:
        yield running
    finally:
        running.down()


def test_hooks_skip_a_node_remembered_unreachable(bed: testbed.Testbed) -> None:
    node2, node3 = bed.nodes[1], bed.nodes[2]
    pid = running_pid(node3.paths.pid_file("corral-noded"))
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # connections to it hang: unreachable, not offline
    try:
        listed = bed.gnt("node", "list", "--no-headers", "-o", "name,mtotal")
        assert listed.stdout.splitlines()[2].split() == [node3.name, "?"], listed.stdout
        # node-remove runs its pre hooks on every node but the removed one:
        # node 3's are skipped, with Ganeti's warning, and the removal goes on.
        removed = bed.gnt("node", "remove", node2.name)
        assert removed.returncode == 0, removed.stderr
        output = removed.stdout + removed.stderr
        assert f"Communication failure to node {node3.name}" in output, output
        assert "its pre hooks were not run" in output, output
        # Not asked at all: known to be down, it is not waited for again.
        assert "not asked: unreachable since" in output, output
        remaining = bed.gnt("node", "list", "--no-headers", "-o", "name").stdout.split()
        assert remaining == [bed.nodes[0].name, node3.name]
    finally:
        os.kill(pid, signal.SIGCONT)
