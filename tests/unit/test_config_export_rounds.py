"""config.data follows the commits by rounds (corral.services.config_export):
a lone commit is in the file a moment later, nobody waiting; a stream of
commits costs one write per WRITE_INTERVAL, not one per commit (rendering the
file grows with the configuration, a commit does not); whoever waits for the
file gets it at once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from corral.services import config_export
from corral.services.config_data import ConfigImage
from tests.helpers.inprocess import InProcessCluster, in_process_cluster
from tests.helpers.waiting import wait_until_async

# No second round within a test: every write beyond the first is asked for.
LONG = 3600.0


async def tag(cl: InProcessCluster, name: str) -> None:
    job = await cl.run({"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": [name]})
    assert job.status == "success", job.error


def file_tags(cl: InProcessCluster) -> list[str]:
    return sorted(json.loads(cl.paths.config_data.read_bytes())["cluster"]["tags"])


async def test_a_stream_of_commits_waits_for_its_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config_export, "WRITE_INTERVAL", LONG)
    monkeypatch.setattr(config_export, "QUIET", LONG)
    async with in_process_cluster(tmp_path) as cl:
        writes: list[int] = []
        write_file = cl.export._write_file

        def counted(image: ConfigImage) -> bytes:
            writes.append(image.serial)
            return write_file(image)

        assert await cl.export.settled(30)  # the round of masterd's start
        monkeypatch.setattr(cl.export, "_write_file", counted)
        for i in range(10):
            await tag(cl, f"burst{i}")
        # The next round is an interval away: nothing was written.
        assert writes == []
        assert file_tags(cl) == []
        # Whoever waits for the file gets every commit in one write at once.
        await asyncio.wait_for(cl.export.written(cl.cfg.serial), 30)
        assert writes == [cl.cfg.serial]
        assert file_tags(cl) == [f"burst{i}" for i in range(10)]
        assert await cl.export.settled(30)


async def test_a_lone_commit_follows_nobody_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config_export, "WRITE_INTERVAL", LONG)
    async with in_process_cluster(tmp_path) as cl:
        assert await cl.export.settled(30)
        await tag(cl, "alone")
        # The quiet time (not the interval) passes: the writer takes it alone.
        await wait_until_async(lambda: file_tags(cl) == ["alone"], 30, "the file")
