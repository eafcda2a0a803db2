"""Opportunistic locking on instance creation (Ganeti's ``opportunistic_locking``,
which its move-instance sends), in-process: with an allocator, the unit takes
the node locks that are free and lets the allocator choose among those nodes;
when none of them fits, it falls back to locking every node (the opcode waits
again); without an allocator the flag is refused.  Node 1 has the most memory,
so an allocator left to itself picks it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import testbed
from corral.objects import Node
from tests.helpers.inprocess import JOB_TIMEOUT, OS_NAME, InProcessCluster, in_process_cluster

INST = "inst1.example.com"
HOLDER = "another-job"
MEMORY = {1: 8192, 2: 2048}


@pytest.fixture
async def cl(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    async with in_process_cluster(tmp_path, nodes=2) as cluster:
        for index, mib in MEMORY.items():
            memory = cluster.node(index).paths.conf_dir / "fake-hypervisor-memory"
            memory.parent.mkdir(parents=True, exist_ok=True)
            memory.write_text(str(mib))
        yield cluster
        cluster.master.locks.release(HOLDER)


def create(memory: int = 512, **fields: Any) -> dict[str, Any]:
    return {
        "OP_ID": "OP_INSTANCE_CREATE",
        "instance_name": INST,
        "mode": "create",
        "disk_template": "diskless",
        "disks": [],
        "nics": [],
        "os_type": OS_NAME,
        "iallocator": "hail",
        "opportunistic_locking": True,
        "beparams": {"maxmem": memory, "minmem": memory},
        "name_check": False,
        "ip_check": False,
        **fields,
    }


async def hold_node_res(cl: InProcessCluster, index: int) -> None:
    """Another job's exclusive node-res lock on node ``index``."""
    uuid = cl.config_node(index).uuid
    await cl.master.locks.acquire(HOLDER, C.LEVEL_NODE_RES, [uuid], shared=False)


def primary(cl: InProcessCluster) -> str:
    inst = cl.instance(INST)
    assert inst is not None
    return cl.cfg.lookup(Node, inst.primary_node).name


async def follow(cl: InProcessCluster, job_id: int, until: Any) -> list[str]:
    """Follow the job (WaitForJobChange) until ``until(status, messages)``;
    the log messages so far."""
    info: Any = None
    serial = 0
    messages: list[str] = []
    async with asyncio.timeout(JOB_TIMEOUT):
        while info is None or not until(info[0], messages):
            change = await cl.queue.queries.wait_for_change(job_id, ["status"], info, serial, 10.0)
            if change != "nochange":
                info, entries = change
                messages += [str(entry[3]) for entry in entries]
                serial = max([serial, *(entry[0] for entry in entries)])
    return messages


async def test_the_allocator_chooses_among_the_nodes_free_now(cl: InProcessCluster) -> None:
    await hold_node_res(cl, 1)
    job = await cl.run(create())
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert primary(cl) == testbed.node_name(2)
    node2 = testbed.node_name(2)
    assert f" - INFO: Selected nodes for instance {INST} via iallocator hail: {node2}" in job.log


async def test_no_fitting_free_node_falls_back_to_every_node(cl: InProcessCluster) -> None:
    """Node 2, the only free one, is too small: Ganeti's temporary failure, then
    the opcode waits again, for node 1, and goes there once it is released."""
    await hold_node_res(cl, 1)
    job_id = await cl.queue.submit([create(memory=4096)])
    log = await follow(
        cl,
        job_id,
        lambda status, messages: (
            status == C.JOB_STATUS_WAITING and "* falling back to full lock allocation" in messages
        ),
    )
    assert any(
        m.startswith(" - INFO: IAllocator 'hail' failed on opportunistically acquired nodes")
        for m in log
    ), log
    assert cl.instance(INST) is None
    cl.master.locks.release(HOLDER)
    job = await cl.wait(job_id)
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert primary(cl) == testbed.node_name(1)


async def test_refused_without_an_allocator(cl: InProcessCluster) -> None:
    job = await cl.run(create(iallocator=None, pnode=testbed.node_name(2)))
    assert job.status == C.JOB_STATUS_ERROR
    assert job.result == [
        "OpPrereqError",
        [
            "The opportunistic locking flag is only supported with an instance allocator",
            C.ECODE_INVAL,
        ],
    ]
    assert cl.instance(INST) is None
