"""Hooks on the master node against an in-process cluster: masterd, which
runs on that node, asks its noded to run a phase's hooks only when the
node's hooks directory holds a script that runs; otherwise the answer is
known (nothing ran) and the round trip of every config change is saved."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from corral import constants as C
from corral.hook_scripts import hooks_subdir
from tests.helpers.inprocess import InProcessCluster, in_process_cluster

TAG = {"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": ["t1"]}
NOT_RUN = "its post hooks were not run"


@pytest.fixture
async def cl(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    async with in_process_cluster(tmp_path) as cluster:
        yield cluster


def config_update_dir(cl: InProcessCluster) -> Path:
    return cl.paths.hooks_dir / hooks_subdir(C.HOOKS_NAME_CFGUPDATE, C.HOOKS_PHASE_POST)


async def test_no_script_no_call(cl: InProcessCluster) -> None:
    """The master's noded would fail the call: it is never made."""
    directory = config_update_dir(cl)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "not-executable").write_text("#!/bin/sh\nexit 1\n")
    (directory / "bad.name").write_text("#!/bin/sh\nexit 1\n")
    (directory / "bad.name").chmod(0o755)
    cl.node(1).go_down_at("hooks_runner")
    job = await cl.run(TAG)
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert not any(NOT_RUN in line for line in job.log), job.log
    assert cl.node(1).reachable


async def test_a_script_is_run_by_noded(cl: InProcessCluster) -> None:
    directory = config_update_dir(cl)
    directory.mkdir(parents=True, exist_ok=True)
    out = cl.paths.root / "ran"
    script = directory / "10-log"
    script.write_text(f'#!/bin/sh\necho "$GANETI_OP_CODE" > {out}\n')
    script.chmod(0o755)
    job = await cl.run(TAG)
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert out.read_text() == "OP_TAGS_SET\n"
    cl.node(1).go_down_at("hooks_runner")  # now the call is made, and fails
    job = await cl.run({**TAG, "tags": ["t2"]})
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert any(NOT_RUN in line for line in job.log), job.log
