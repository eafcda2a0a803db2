"""gnt-cluster verify-disks and repair-disk-sizes against real nodes in-process
(tests/helpers/inprocess.py); the commands' output is compared with Ganeti's
own gnt-cluster in tests/conformance/test_cluster.py."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import testbed
from tests.helpers.inprocess import OS_NAME, InProcessCluster, in_process_cluster

MIB = 1024 * 1024
INSTANCES = ("inst1.example.com", "inst2.example.com")


@pytest.fixture
async def cl(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    async with in_process_cluster(tmp_path, nodes=2) as cluster:
        for index, name in enumerate(INSTANCES, start=1):
            job = await cluster.run(
                {
                    "OP_ID": "OP_INSTANCE_CREATE",
                    "instance_name": name,
                    "mode": "create",
                    "disk_template": "file",
                    "disks": [{"size": 4}, {"size": 8}],
                    "nics": [],
                    "os_type": OS_NAME,
                    "pnode": testbed.node_name(index),
                    "name_check": False,
                    "ip_check": False,
                    "start": False,
                }
            )
            assert job.status == C.JOB_STATUS_SUCCESS, job.error
        yield cluster


def resize(cl: InProcessCluster, index: int, name: str, disk: int, mib: int) -> None:
    """Change a disk file's size behind the configuration's back."""
    inst = cl.instance(name)
    assert inst is not None
    path = cl.node(index).paths.from_wire(inst.disks[disk].logical_id[1])
    os.truncate(path, mib * MIB)


def sizes(cl: InProcessCluster) -> dict[str, list[int]]:
    return {i.name: [d.size for d in i.disks] for i in cl.cfg.instances()}


def repair(*names: str) -> dict[str, Any]:
    return {"OP_ID": "OP_CLUSTER_REPAIR_DISK_SIZES", "instances": list(names)}


async def test_repair_records_the_sizes_the_nodes_measure(cl: InProcessCluster) -> None:
    resize(cl, 1, INSTANCES[0], 1, 12)
    resize(cl, 2, INSTANCES[1], 0, 6)
    job = await cl.run(repair())
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert sorted(job.result) == [[INSTANCES[0], 1, "size", 12], [INSTANCES[1], 0, "size", 6]]
    assert sizes(cl) == {INSTANCES[0]: [4, 12], INSTANCES[1]: [6, 8]}
    again = await cl.run(repair())
    assert again.status == C.JOB_STATUS_SUCCESS and again.result == []


async def test_repair_of_named_instances_touches_only_them(cl: InProcessCluster) -> None:
    resize(cl, 1, INSTANCES[0], 0, 5)
    resize(cl, 2, INSTANCES[1], 0, 7)
    job = await cl.run(repair(INSTANCES[1]))
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert job.result == [[INSTANCES[1], 0, "size", 7]]
    assert sizes(cl) == {INSTANCES[0]: [4, 8], INSTANCES[1]: [7, 8]}


async def test_a_node_that_cannot_measure_is_skipped_with_a_warning(
    cl: InProcessCluster,
) -> None:
    resize(cl, 1, INSTANCES[0], 0, 5)
    resize(cl, 2, INSTANCES[1], 0, 7)
    cl.node(2).reachable = False
    job = await cl.run(repair())
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert job.result == [[INSTANCES[0], 0, "size", 5]]
    node2 = testbed.node_name(2)
    warning = f" - WARNING: Failure in blockdev_getdimensions call to node {node2}, ignoring"
    assert warning in job.log
    assert sizes(cl) == {INSTANCES[0]: [5, 8], INSTANCES[1]: [4, 8]}


async def test_repair_of_an_unknown_instance_is_refused(cl: InProcessCluster) -> None:
    serial = cl.cfg.serial
    job = await cl.run(repair("nosuch.example.com"))
    assert job.status == C.JOB_STATUS_ERROR
    assert job.error == "Instance 'nosuch.example.com' not known"
    assert cl.cfg.serial == serial


async def test_verify_disks_submits_one_job_per_group(cl: InProcessCluster) -> None:
    job = await cl.run({"OP_ID": "OP_CLUSTER_VERIFY_DISKS"})
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    [[ok, group_job]] = job.result["jobs"]
    assert ok is True
    verified = await cl.wait(group_job)
    assert verified.status == C.JOB_STATUS_SUCCESS
    assert verified.result == [{}, [], {}]
