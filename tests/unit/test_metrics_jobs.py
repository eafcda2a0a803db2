"""masterd's job metrics, kept by the queue's list index as jobs change: they
agree with what the queue answers, through submission, failure, cancel,
archive and a restart; and the instance counts follow config commits."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corral import constants as C
from corral.jobs.queue import JobQueue
from corral.metrics.instances import InstanceStates
from corral.metrics.jobs import JobStats, operation
from corral.metrics.registry import Gauge, render
from corral.objects import Instance, Node
from corral.objects.base import ConfigObject
from corral.objects.disk import Disk
from tests.unit.jobqueue_helpers import QueueHarness, delay, gated, jqueue


async def _listed(queue: JobQueue) -> collections.Counter[tuple[str, ...]]:
    """(operation, status) → jobs, from the queue's own answer (as gnt-job list)."""
    answer = await queue.queries.query(["id", "status", "ops"], None)
    counted: collections.Counter[tuple[str, ...]] = collections.Counter()
    for _id, (_s, status), (_o, ops) in answer["data"]:
        counted[(",".join(op["OP_ID"] for op in ops), status)] += 1
    return counted


def _counted(stats: JobStats) -> collections.Counter[tuple[str, ...]]:
    return collections.Counter({k: int(v) for k, v in stats.jobs.values.items()})


def test_operation_is_the_op_ids_of_the_summary() -> None:
    assert operation(["TEST_DELAY(0.0)"]) == "OP_TEST_DELAY"
    assert operation(["TAGS_SET(a(b))", "TEST_JQUEUE"]) == "OP_TAGS_SET,OP_TEST_JQUEUE"


async def test_counts_follow_every_state_and_agree_with_the_queue(harness: QueueHarness) -> None:
    q = harness.queue
    ok = await q.submit([delay(0.0)])
    failed = await q.submit([jqueue(fail=True)])
    two = await q.submit([jqueue(), jqueue(fail=True)])
    waiting = await q.submit([gated("w")])
    running = await q.submit([gated("r", running=True)])
    for job in (ok, failed, two):
        await harness.wait_status(job)
    await harness.wait_status(waiting, {C.JOB_STATUS_WAITING})
    await harness.wait_status(running, {C.JOB_STATUS_RUNNING})
    stats = q.stats
    assert _counted(stats) == await _listed(q)
    assert stats.jobs.get("OP_TEST_JQUEUE,OP_TEST_JQUEUE", "error") == 1
    assert stats.by_status(C.JOB_STATUS_ERROR) == 2
    assert "corral_job_queue_depth 1" in render(stats.metrics())
    # Durations of the jobs that ended here, by operation.
    assert stats.durations.series[("OP_TEST_DELAY",)].count == 1
    assert stats.durations.series[("OP_TEST_JQUEUE",)].count == 1
    assert stats.commits.series[("jobs",)].count >= 1
    # Cancelled while waiting; the running one let go.
    assert (await q.cancel(waiting))[0]
    harness.release("r")
    await harness.wait_status(running)
    await q.flush()
    assert _counted(stats) == await _listed(q)
    assert stats.by_status(C.JOB_STATUS_CANCELED) == 1
    assert "corral_job_queue_depth 0" in render(stats.metrics())
    # Archived jobs are no longer counted.
    assert await q.archive(ok)
    assert _counted(stats) == await _listed(q)
    assert stats.jobs.get("OP_TEST_DELAY", "success") == 0
    assert ("OP_TEST_DELAY", "success") not in stats.jobs.values


async def test_a_restarted_queue_counts_the_stored_jobs_once(tmp_path: Path) -> None:
    first = QueueHarness(tmp_path)
    for ops in ([delay(0.0)], [jqueue(fail=True)], [jqueue()]):
        await first.wait_status(await first.queue.submit(ops))
    await first.close()
    again = QueueHarness(tmp_path)
    try:
        await again.queue.recover()
        stats = again.queue.stats
        assert _counted(stats) == await _listed(again.queue)
        assert sum(_counted(stats).values()) == 3
        assert stats.durations.series == {}  # none of them ended in this process
    finally:
        await again.close()


class _Config:
    """A config manager's view: instances by serial, changes kept for some serials."""

    def __init__(self, instances: list[Instance]) -> None:
        self.serial = 1
        self._instances = {i.uuid: i for i in instances}
        self._changes: dict[int, tuple[list[ConfigObject], list[ConfigObject]]] = {}

    def commit(self, upserts: list[Instance], deletes: list[Instance]) -> None:
        self.serial += 1
        self._changes[self.serial] = (list(upserts), list(deletes))
        for inst in deletes:
            self._instances.pop(inst.uuid)
        for inst in upserts:
            self._instances[inst.uuid] = inst

    def forget(self) -> None:
        self._changes.clear()

    def changes_since(
        self, serial: int
    ) -> Sequence[tuple[Sequence[ConfigObject], Sequence[ConfigObject]]] | None:
        wanted = range(serial + 1, self.serial + 1)
        if any(s not in self._changes for s in wanted):
            return None
        return [self._changes[s] for s in wanted]

    def instances(self) -> list[Instance]:
        return list(self._instances.values())

    def nodes(self) -> list[Node]:
        return []


def _instance(name: str, state: str, outdated: list[str] | None = None) -> Instance:
    disks = [] if outdated is None else [Disk(size=1, dev_type="mirrored", outdated=outdated)]
    return Instance(
        name=name, primary_node="n1", os="demo", hypervisor="fake", admin_state=state,
        disk_template="mirrored" if disks else "diskless", disks=disks,
    )  # fmt: skip


def _gauges(states: InstanceStates, cfg: _Config) -> dict[str, Any]:
    admin, disks = states.metrics(cfg)
    assert isinstance(admin, Gauge) and isinstance(disks, Gauge)
    return {"admin": dict(admin.values), "disks": dict(disks.values)}


def test_instance_counts_follow_commits_and_recount_when_changes_are_gone() -> None:
    a, b = _instance("a", "up", ["n2"]), _instance("b", "down", [])
    cfg = _Config([a, b, _instance("c", "down")])
    states = InstanceStates()
    assert _gauges(states, cfg) == {
        "admin": {("up",): 1, ("down",): 2, ("offline",): 0},
        "disks": {("in_sync",): 1, ("outdated",): 1},
    }
    synced = a.model_copy(update={"disks": [Disk(size=1, dev_type="mirrored")]})
    cfg.commit([synced, b.model_copy(update={"admin_state": "up"})], [])
    cfg.commit([], [cfg.instances()[2]])
    assert _gauges(states, cfg) == {
        "admin": {("up",): 2, ("down",): 0, ("offline",): 0},
        "disks": {("in_sync",): 2, ("outdated",): 0},
    }
    cfg.commit([_instance("d", "offline", ["n1"])], [])
    cfg.forget()  # the manager no longer keeps the change: counted again
    assert _gauges(states, cfg) == {
        "admin": {("up",): 2, ("down",): 0, ("offline",): 1},
        "disks": {("in_sync",): 2, ("outdated",): 1},
    }
