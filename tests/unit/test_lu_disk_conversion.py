"""Disk template conversion (``gnt-instance modify -t``) against real nodes
in-process (tests/helpers/inprocess.py): the data is copied, holes stay
holes, the old disks go; refusals and a failed copy change nothing."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import testbed
from corral.node.storage.file import REMOVING
from corral.objects import Instance
from tests.helpers.inprocess import InProcessCluster, create_op, in_process_cluster

INST = "inst1.example.com"
MIB = 1024 * 1024
SUCCESS, ERROR = C.JOB_STATUS_SUCCESS, C.JOB_STATUS_ERROR


@pytest.fixture
async def cl(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    async with in_process_cluster(tmp_path, nodes=1) as cluster:
        cluster.node(1).paths.shared_file_storage_dir.mkdir(parents=True)
        enable = {
            "OP_ID": "OP_CLUSTER_SET_PARAMS",
            "enabled_disk_templates": ["file", "diskless", "sharedfile"],
            "ipolicy": {"disk-templates": ["file", "diskless", "sharedfile"]},
        }
        job = await cluster.run(enable)
        assert job.status == SUCCESS, job.error
        job = await cluster.run(create(INST, "file", [{"size": 4}, {"size": 8}]))
        assert job.status == SUCCESS, job.error
        yield cluster


def create(name: str, template: str, disks: list[dict[str, Any]]) -> dict[str, Any]:
    return create_op(name, testbed.node_name(1), template, disks)


def inst(cl: InProcessCluster, name: str = INST) -> Instance:
    found = cl.instance(name)
    assert found is not None
    return found


def disk_path(cl: InProcessCluster, index: int) -> Path:
    return cl.node(1).paths.from_wire(inst(cl).disks[index].logical_id[1])


def modify(template: str, name: str = INST, **fields: Any) -> dict[str, Any]:
    return {
        "OP_ID": "OP_INSTANCE_SET_PARAMS",
        "instance_name": name,
        "disk_template": template,
        **fields,
    }


async def test_conversion_copies_the_data_and_removes_the_old_disks(cl: InProcessCluster) -> None:
    old = [disk_path(cl, 0), disk_path(cl, 1)]
    with open(old[1], "r+b") as disk:
        disk.write(b"first")
        disk.seek(6 * MIB)
        disk.write(b"far out")
    job = await cl.run(modify("sharedfile"))
    assert job.status == SUCCESS, job.error
    assert ["disk_template", "sharedfile"] in job.result
    assert " - copying data from disk 1 (file), size 8M" in job.log
    converted = inst(cl)
    assert converted.disk_template == "sharedfile"
    assert [d.size for d in converted.disks] == [4, 8]
    new = [disk_path(cl, 0), disk_path(cl, 1)]
    assert all(p.is_relative_to(cl.node(1).paths.shared_file_storage_dir) for p in new)
    assert not old[0].exists() and not old[1].exists()
    data = new[1].read_bytes()
    assert data[:5] == b"first" and data[6 * MIB : 6 * MIB + 7] == b"far out"
    assert len(data) == 8 * MIB
    # The holes stay holes: only what was written takes blocks.
    assert os.stat(new[1]).st_blocks * 512 < MIB


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"disk_template": "file"}, "Instance already has disk template file"),
        ({"disk_template": "diskless"}, "Conversion to the 'diskless' disk template is not"),
        ({"disk_template": "blockdev"}, "Conversion to the 'blockdev' disk template is not"),
        ({"disk_template": "plain"}, "Disk template 'plain' is not enabled for this cluster"),
        ({"disks": [["add", {"size": 4}]]}, "Disk template conversion and other disk changes"),
    ],
)
async def test_refusals_change_nothing(
    cl: InProcessCluster, fields: dict[str, Any], error: str
) -> None:
    serial = cl.cfg.serial
    job = await cl.run({**modify("sharedfile"), **fields})
    assert job.status == ERROR
    assert error in job.error
    assert cl.cfg.serial == serial and disk_path(cl, 0).exists()


async def test_a_diskless_instance_is_not_converted(cl: InProcessCluster) -> None:
    job = await cl.run(create("bare.example.com", "diskless", []))
    assert job.status == SUCCESS, job.error
    job = await cl.run(modify("file", name="bare.example.com"))
    assert job.status == ERROR
    assert job.error == "Conversion from the 'diskless' disk template is not supported"


async def test_a_running_instance_is_not_converted(cl: InProcessCluster) -> None:
    job = await cl.run({"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": INST})
    assert job.status == SUCCESS, job.error
    job = await cl.run(modify("sharedfile"))
    assert job.status == ERROR
    assert job.error == f"Instance '{INST}' is marked to be up, cannot change disk template"


async def test_a_failed_copy_removes_the_new_disks(cl: InProcessCluster) -> None:
    disk_path(cl, 1).unlink()  # the second copy fails: its source is gone
    serial = cl.cfg.serial
    job = await cl.run(modify("sharedfile"))
    assert job.status == ERROR
    assert job.error.startswith("Error while converting the instance's template")
    assert cl.cfg.serial == serial and inst(cl).disk_template == "file"
    shared = cl.node(1).paths.shared_file_storage_dir
    # (A removed disk's blocks are freed in the background, under a REMOVING name.)
    left = [p for p in shared.rglob("*") if p.is_file() and not p.name.startswith(REMOVING)]
    assert left == []
    assert disk_path(cl, 0).exists()
