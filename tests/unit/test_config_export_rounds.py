"""config.data follows the commits by rounds (corral.services.config_export):
an opcode that changed the configuration ends only once the file holds its
change (as Ganeti's: its QA reads the file between two commands), opcodes
that end together share one write (waiting, they hold no running slot), one
that changed nothing never waits, and
a lone commit nobody waits for is in the file a moment later."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

from corral.services import config_export
from corral.services.config_data import ConfigImage
from tests.helpers.inprocess import InProcessCluster, in_process_cluster
from tests.helpers.waiting import wait_until_async

# No round within a test unless somebody waits for the file.
LONG = 3600.0


def tag_op(name: str) -> dict[str, object]:
    return {"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": [name]}


async def tag(cl: InProcessCluster, name: str) -> None:
    job = await cl.run(tag_op(name))
    assert job.status == "success", job.error


def file_tags(cl: InProcessCluster) -> list[str]:
    return sorted(json.loads(cl.paths.config_data.read_bytes())["cluster"]["tags"])


class GatedWrites:
    """Counts the writer's rounds; the first one waits for :meth:`open`."""

    def __init__(self, cl: InProcessCluster, monkeypatch: pytest.MonkeyPatch) -> None:
        self.serials: list[int] = []
        self.started = threading.Event()
        self._gate = threading.Event()
        write_file = cl.export._write_file

        def gated(image: ConfigImage) -> bytes:
            self.serials.append(image.serial)
            self.started.set()
            self._gate.wait(60)
            return write_file(image)

        monkeypatch.setattr(cl.export, "_write_file", gated)

    def open(self) -> None:
        self._gate.set()


@pytest.fixture
def rounds_only_when_waited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config_export, "WRITE_INTERVAL", LONG)
    monkeypatch.setattr(config_export, "QUIET", LONG)


@pytest.mark.usefixtures("rounds_only_when_waited")
async def test_a_job_that_changed_the_config_ends_with_it_in_the_file(tmp_path: Path) -> None:
    async with in_process_cluster(tmp_path) as cl:
        assert await cl.export.settled(30)  # the round of masterd's start
        for i in range(3):
            await tag(cl, f"t{i}")
            # Read at once, as Ganeti's QA does after a command.
            assert file_tags(cl) == [f"t{j}" for j in range(i + 1)]


@pytest.mark.usefixtures("rounds_only_when_waited")
async def test_jobs_that_end_together_share_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with in_process_cluster(tmp_path) as cl:
        # One job at a time: a job waiting for the file has given up its slot.
        job = await cl.run({"OP_ID": "OP_CLUSTER_SET_PARAMS", "max_running_jobs": 1})
        assert job.status == "success", job.error
        assert await cl.export.settled(30)
        writes = GatedWrites(cl, monkeypatch)
        first = asyncio.create_task(tag(cl, "first"))
        await asyncio.to_thread(writes.started.wait, 60)  # its round holds the writer
        serial = cl.cfg.serial
        # Nine more jobs commit (the first one's locks are free) and wait.
        rest = [asyncio.create_task(tag(cl, f"then{i}")) for i in range(9)]
        await wait_until_async(lambda: cl.cfg.serial == serial + 9, 30, "nine commits")
        assert not first.done() and not any(task.done() for task in rest)
        writes.open()
        await asyncio.gather(first, *rest)
        assert writes.serials == [serial, serial + 9]
        assert file_tags(cl) == sorted(["first", *(f"then{i}" for i in range(9))])


@pytest.mark.usefixtures("rounds_only_when_waited")
async def test_a_job_that_changed_nothing_does_not_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with in_process_cluster(tmp_path) as cl:
        assert await cl.export.settled(30)
        writes = GatedWrites(cl, monkeypatch)
        changing = asyncio.create_task(tag(cl, "pending"))
        await asyncio.to_thread(writes.started.wait, 60)
        # A query job ends while the file still lacks the other job's change.
        job = await cl.run({"OP_ID": "OP_TAGS_GET", "kind": "cluster"})
        assert job.status == "success", job.error
        assert job.result == ["pending"]
        assert not changing.done()
        writes.open()
        await changing


async def test_a_lone_commit_follows_nobody_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config_export, "WRITE_INTERVAL", LONG)
    async with in_process_cluster(tmp_path) as cl:
        assert await cl.export.settled(30)
        # A commit outside any job (as masterd's own services make): nobody
        # waits, and the quiet time (not the interval) brings it to the file.
        tx = cl.cfg.transaction()
        cluster = cl.cfg.cluster.model_copy(update={"tags": ["alone"]})
        tx.update(cluster)
        assert await tx.commit()
        await wait_until_async(lambda: file_tags(cl) == ["alone"], 30, "the file")
