"""ganeti-watcher's care of mirrored disks (corral.tools.watcher_disks), as
Ganeti's watcher cares for DRBD: a node whose boot id changed gets the disks
of the instances it is secondary for activated again (not those inactive or
just started), and the instances the group's disk check finds behind get
activate-disks (not those on offline or dead nodes); each in a job, logged.

The cluster side of it (a real secondary left behind, then resynced) is in
tests/integration/test_mirrored_kvm.py; a reboot (a new boot id from the
kernel) cannot be made on one machine, so this is where the boot ids change."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, cast

import pytest

from corral.luxi.client import Client
from corral.tools import watcher_disks
from corral.tools.watcher_disks import InstanceRow, NodeRow
from corral.tools.watcher_state import WatcherState

N1, N2, N3 = "node1", "node2", "node3"


class FakeQueue:
    """The luxi calls the watcher's jobs make; every job succeeds at once
    with the results given for its opcode."""

    def __init__(self, results: dict[str, Any] | None = None) -> None:
        self.jobs: list[list[dict[str, Any]]] = []
        self.results = results or {}

    def submit_job(self, ops: list[dict[str, Any]]) -> int:
        self.jobs.append(ops)
        return len(self.jobs)

    def wait_for_job_change(self, job_id: int, *_: Any) -> Any:
        return [["success"], []]

    def query_jobs(self, job_ids: list[int], _fields: list[str]) -> list[Any]:
        ops = self.jobs[job_ids[0] - 1]
        results = [self.results.get(op["OP_ID"]) for op in ops]
        return [["success", ["success"] * len(ops), results]]

    def activated(self) -> list[list[str]]:
        """The instances of each activate-disks job, in order."""
        return [
            [op["instance_name"] for op in ops]
            for ops in self.jobs
            if ops[0]["OP_ID"] == "OP_INSTANCE_ACTIVATE_DISKS"
        ]


def inst(snodes: list[str], *, active: bool = True, status: str = "running") -> InstanceRow:
    return InstanceRow(status, "up", "admin", active, snodes)


@pytest.fixture
def state(tmp_path: Path) -> WatcherState:
    return WatcherState(str(tmp_path / "watcher.data"))


def test_a_rebooted_secondary_gets_its_instances_disks_activated(
    state: WatcherState, caplog: pytest.LogCaptureFixture
) -> None:
    nodes = [NodeRow(N1, "boot-a", False), NodeRow(N2, "boot-b", False)]
    instances = {
        "db": inst([N2]),
        "idle": inst([N2], active=False),
        "started": inst([N2]),
        "elsewhere": inst([N1]),
        "plain": inst([]),
    }
    queue = FakeQueue()
    client = cast(Client, queue)
    state.set_boot_id(N1, "boot-a")
    state.set_boot_id(N2, "boot-b")
    watcher_disks.check_boot_ids(client, state, nodes, instances, {"started"})
    assert queue.jobs == []  # no boot id changed

    caplog.set_level(logging.INFO, logger="ganeti-watcher")
    rebooted = [NodeRow(N1, "boot-a", False), NodeRow(N2, "boot-c", False)]
    watcher_disks.check_boot_ids(client, state, rebooted, instances, {"started"})
    assert queue.activated() == [["db"]]
    [[op]] = queue.jobs
    assert op["reason"][0][:2] == ["gnt:watcher", "Activating disks for instance db"]
    assert state.boot_id(N2) == "boot-c"
    assert "Node 'node2' has rebooted (boot id boot-c)" in caplog.text
    assert "Activating disks for instance 'db'" in caplog.text
    assert "Skipping disk activation for instance with not activated disks 'idle'" in caplog.text
    # Recorded: the next run activates nothing.
    watcher_disks.check_boot_ids(client, state, rebooted, instances, set())
    assert queue.activated() == [["db"]]


def test_a_node_without_a_boot_id_is_skipped(state: WatcherState) -> None:
    queue = FakeQueue()
    nodes = [NodeRow(N2, None, False), NodeRow(N3, "", True)]
    watcher_disks.check_boot_ids(cast(Client, queue), state, nodes, {"db": inst([N2])}, set())
    assert queue.jobs == [] and state.boot_id(N2) is None


def test_instances_behind_get_their_disks_activated_in_one_job(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ganeti-watcher")
    behind = ["db", "down", "offline2", "gone"]
    queue = FakeQueue({"OP_GROUP_VERIFY_DISKS": [{N3: "no answer"}, behind, {}]})
    nodes = [NodeRow(N1, "a", False), NodeRow(N2, "b", False), NodeRow(N3, "c", True)]
    instances = {
        "db": inst([N2]),
        "down": inst([N2], status="ERROR_nodedown"),
        "offline2": inst([N3]),
        "fine": inst([N2]),
    }
    watcher_disks.verify_disks(cast(Client, queue), "uuid-1", nodes, instances)
    verify, _ = queue.jobs
    assert verify[0]["OP_ID"] == "OP_GROUP_VERIFY_DISKS" and verify[0]["group_name"] == "uuid-1"
    assert queue.activated() == [["db"]]
    assert "Activating disks for instance 'db'" in caplog.text
    assert "Skipping instance 'down' because it is in a helpless state" in caplog.text
    assert "Skipping instance 'offline2' because it is in a helpless state" in caplog.text
    assert "Can't find instance 'gone', maybe it was ignored" in caplog.text
    assert "Error verifying disks of node node3: no answer" in caplog.text


def test_nothing_behind_submits_only_the_check() -> None:
    queue = FakeQueue({"OP_GROUP_VERIFY_DISKS": [{}, [], {}]})
    watcher_disks.verify_disks(cast(Client, queue), "uuid-1", [], {"db": inst([N2])})
    assert len(queue.jobs) == 1 and queue.activated() == []
