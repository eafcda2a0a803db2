"""activate-disks, deactivate-disks and recreate-disks against real nodes
in-process (tests/helpers/inprocess.py): done, refused (nothing changes), and
failing half-way on a node (what was made goes)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import testbed
from corral.objects import Instance
from tests.helpers.inprocess import OS_NAME, InProcessCluster, in_process_cluster

INST = "inst1.example.com"
NODE1, NODE2 = testbed.node_name(1), testbed.node_name(2)
SUCCESS, ERROR = C.JOB_STATUS_SUCCESS, C.JOB_STATUS_ERROR


@pytest.fixture
async def cl(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    async with in_process_cluster(tmp_path, nodes=2) as cluster:
        job = await cluster.run(
            {
                "OP_ID": "OP_INSTANCE_CREATE",
                "instance_name": INST,
                "mode": "create",
                "disk_template": "file",
                "disks": [{"size": 4}, {"size": 8}],
                "nics": [],
                "os_type": OS_NAME,
                "pnode": NODE1,
                "name_check": False,
                "ip_check": False,
                "start": False,
            }
        )
        assert job.status == SUCCESS, job.error
        yield cluster


def inst(cl: InProcessCluster) -> Instance:
    found = cl.instance(INST)
    assert found is not None
    return found


def disk_file(cl: InProcessCluster, node: int, index: int) -> Path:
    return cl.node(node).paths.from_wire(inst(cl).disks[index].logical_id[1])


def op(op_id: str, **fields: Any) -> dict[str, Any]:
    return {"OP_ID": op_id, "instance_name": INST, **fields}


async def start(cl: InProcessCluster) -> None:
    job = await cl.run(op("OP_INSTANCE_STARTUP"))
    assert job.status == SUCCESS, job.error


# activate-disks, deactivate-disks
async def test_activate_returns_each_disks_path_and_marks_them_active(
    cl: InProcessCluster,
) -> None:
    job = await cl.run(op("OP_INSTANCE_ACTIVATE_DISKS"))
    assert job.status == SUCCESS, job.error
    paths = [cl.node(1).paths.to_wire(disk_file(cl, 1, i)) for i in (0, 1)]
    assert job.result == [[NODE1, "disk/0", paths[0]], [NODE1, "disk/1", paths[1]]]
    assert inst(cl).disks_active
    job = await cl.run(op("OP_INSTANCE_DEACTIVATE_DISKS"))
    assert job.status == SUCCESS, job.error
    assert not inst(cl).disks_active


async def test_startup_and_shutdown_mark_the_disks_active_and_inactive(
    cl: InProcessCluster,
) -> None:
    assert not inst(cl).disks_active
    await start(cl)
    assert inst(cl).disks_active
    job = await cl.run(op("OP_INSTANCE_SHUTDOWN"))
    assert job.status == SUCCESS, job.error
    assert not inst(cl).disks_active


async def test_activate_of_a_missing_disk_fails_and_changes_nothing(cl: InProcessCluster) -> None:
    disk_file(cl, 1, 1).unlink()
    serial = cl.cfg.serial
    job = await cl.run(op("OP_INSTANCE_ACTIVATE_DISKS"))
    assert job.status == ERROR
    assert job.error == "Cannot activate block devices"
    assert any("Could not prepare block device disk/1 on node" in line for line in job.log)
    assert cl.cfg.serial == serial and not inst(cl).disks_active


async def test_deactivate_of_a_running_instance_needs_force(cl: InProcessCluster) -> None:
    await start(cl)
    job = await cl.run(op("OP_INSTANCE_DEACTIVATE_DISKS"))
    assert job.status == ERROR
    assert job.error == f"Instance '{INST}' is marked to be up, cannot shutdown disks"
    job = await cl.run(op("OP_INSTANCE_DEACTIVATE_DISKS", force=True))
    assert job.status == SUCCESS, job.error


# recreate-disks
async def test_recreate_makes_missing_disks_anew(cl: InProcessCluster) -> None:
    disk_file(cl, 1, 0).write_bytes(b"old data")
    disk_file(cl, 1, 0).unlink()
    job = await cl.run(op("OP_INSTANCE_RECREATE_DISKS", disks=[[0, {"size": 6}]]))
    assert job.status == SUCCESS, job.error
    assert disk_file(cl, 1, 0).stat().st_size == 6 * 1024 * 1024
    assert [d.size for d in inst(cl).disks] == [6, 8]


async def test_recreate_where_a_disk_exists_fails_and_removes_what_it_made(
    cl: InProcessCluster,
) -> None:
    disk_file(cl, 1, 0).unlink()
    serial = cl.cfg.serial
    job = await cl.run(op("OP_INSTANCE_RECREATE_DISKS"))
    assert job.status == ERROR
    assert "already exists" in job.error
    assert not disk_file(cl, 1, 0).exists() and disk_file(cl, 1, 1).exists()
    assert cl.cfg.serial == serial


async def test_recreate_on_another_node_moves_the_instance(cl: InProcessCluster) -> None:
    job = await cl.run(op("OP_INSTANCE_RECREATE_DISKS", nodes=[NODE2]))
    assert job.status == SUCCESS, job.error
    assert any("Changing the instance's nodes" in line for line in job.log)
    moved = inst(cl)
    node2 = cl.config_node(2).uuid
    assert moved.primary_node == node2 and all(d.nodes == [node2] for d in moved.disks)
    assert disk_file(cl, 2, 0).exists() and disk_file(cl, 2, 1).exists()
    await start(cl)
    assert cl.running(2) == [INST]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"disks": [0, 0]}, "Some disks have been specified more than once: 0"),
        ({"disks": [[0, {"name": "x"}]]}, "try to change unmodifyable parameter(s): name"),
        ({"disks": [[0, {"spindles": 2}]]}, "Spindles in instance disks cannot be specified"),
        ({"disks": [5]}, "Invalid disk index '5'"),
        ({"disks": [0], "nodes": [NODE2]}, "Can't recreate disks partially and change the"),
        ({"nodes": [NODE1, NODE2]}, "currently has 1 nodes, but 2 replacement nodes"),
        ({"nodes": [NODE2], "iallocator": "hail"}, "Do not specify both, iallocator and node"),
    ],
)
async def test_recreate_refusals_change_nothing(
    cl: InProcessCluster, fields: dict[str, Any], error: str
) -> None:
    disk_file(cl, 1, 0).unlink()
    serial = cl.cfg.serial
    job = await cl.run(op("OP_INSTANCE_RECREATE_DISKS", **fields))
    assert job.status == ERROR
    assert error in job.error
    assert cl.cfg.serial == serial and not disk_file(cl, 1, 0).exists()


async def test_recreate_of_a_running_instance_is_refused(cl: InProcessCluster) -> None:
    await start(cl)
    job = await cl.run(op("OP_INSTANCE_RECREATE_DISKS"))
    assert job.status == ERROR
    assert job.error == f"Instance '{INST}' is marked to be up, cannot recreate disks"
