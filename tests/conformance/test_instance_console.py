"""``gnt-instance console``: Ganeti 3.0.2's command and Corral's, against the
same Corral master, print the same (Ganeti's asks the instance query's
``console`` field, which Corral's nodes fill)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.compare import Output, assert_same, corral, difference, ganeti
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.instances import add, ok
from tests.integration.test_instance_console import serial_console

RUNNING, STOPPED = "c1.example.com", "c2.example.com"


@pytest.fixture(scope="module")
def ccluster(ganeti: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    # A short directory: the console's unix socket path has at most 107 bytes.
    with running_cluster(tmp_path_factory.mktemp("cc")) as cl:
        ok(add(cl, RUNNING, "-t", "diskless", "--no-install"))
        ok(add(cl, STOPPED, "-t", "diskless", "--no-install", "--no-start"))
        yield cl


@pytest.mark.parametrize(
    "argv",
    [
        ["gnt-instance", "console", RUNNING],  # the fake hypervisor's message
        ["gnt-instance", "console", "--show-cmd", RUNNING],
        ["gnt-instance", "console", STOPPED],
        ["gnt-instance", "console", "nosuch.example.com"],
    ],
)
def test_console_answers_as_ganeti(ccluster: TestCluster, argv: list[str]) -> None:
    assert_same(ccluster, argv)


def test_show_cmd_of_a_serial_console_as_ganeti(ccluster: TestCluster) -> None:
    argv = ["gnt-instance", "console", "--show-cmd", RUNNING]
    with serial_console(ccluster.paths, RUNNING):
        theirs = Output.of(ganeti(ccluster, argv))
        ours = Output.of(corral(ccluster, argv))
    # Ganeti runs with the root's directories mounted at their usual places.
    known_hosts = str(ccluster.paths.data_dir / "known_hosts")
    stdout = ours.stdout.replace(known_hosts, "/var/lib/ganeti/known_hosts")
    ours = Output(ours.rc, stdout, ours.stderr)
    assert ours == theirs, difference(theirs, ours)
    assert theirs.rc == 0 and theirs.stdout.startswith("ssh ")
