"""Detaching disks from instances and attaching them again (Ganeti 3.0's
DDM_DETACH and DDM_ATTACH of OP_INSTANCE_SET_PARAMS) against real nodes
in-process (tests/helpers/inprocess.py): the data stays, the configuration
keeps the disk, config.data shows it; refusals change nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import testbed
from corral.config.manager import ConfigManager
from corral.objects import DetachedDisk, Instance
from corral.state.sqlite.config import SqliteConfigStore
from tests.helpers.inprocess import InProcessCluster, create_op, in_process_cluster

INST, OTHER, REMOTE = "inst1.example.com", "inst2.example.com", "inst3.example.com"
NODE1, NODE2 = testbed.node_name(1), testbed.node_name(2)
SUCCESS, ERROR = C.JOB_STATUS_SUCCESS, C.JOB_STATUS_ERROR
MARKER = b"corral detach marker"


def create(
    name: str, node: str, disks: list[dict[str, Any]], template: str = "file"
) -> dict[str, Any]:
    return create_op(name, node, template, disks)


@pytest.fixture
async def cl(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    async with in_process_cluster(tmp_path, nodes=2) as cluster:
        job = await cluster.run(
            create(INST, NODE1, [{"size": 4, "name": "boot"}, {"size": 8, "name": "data"}]),
            create(OTHER, NODE1, [{"size": 4, "name": "other"}]),
            create(REMOTE, NODE2, [{"size": 4, "name": "remote"}]),
        )
        assert job.status == SUCCESS, job.error
        yield cluster


def inst(cl: InProcessCluster, name: str = INST) -> Instance:
    found = cl.instance(name)
    assert found is not None
    return found


def modify(name: str, *disks: list[Any], **fields: Any) -> dict[str, Any]:
    return {
        "OP_ID": "OP_INSTANCE_SET_PARAMS",
        "instance_name": name,
        "disks": list(disks),
        **fields,
    }


def local(cl: InProcessCluster, logical_id: list[str], node: int = 1) -> Path:
    return cl.node(node).paths.from_wire(logical_id[1])


def detached(cl: InProcessCluster) -> list[DetachedDisk]:
    return cl.cfg.detached_disks()


async def detach_data(cl: InProcessCluster) -> DetachedDisk:
    """Detach INST's disk "data" (marked first); the row keeping it."""
    local(cl, inst(cl).disks[1].logical_id).write_bytes(MARKER)
    job = await cl.run(modify(INST, ["detach", "data", {}]))
    assert job.status == SUCCESS, job.error
    assert job.result == [["disk/1", "detach"]]
    (row,) = detached(cl)
    return row


async def test_detach_keeps_the_disk_and_its_data_outside_any_instance(
    cl: InProcessCluster,
) -> None:
    uuid = inst(cl).disks[1].uuid
    old_path = local(cl, inst(cl).disks[1].logical_id)
    row = await detach_data(cl)
    assert [d.name for d in inst(cl).disks] == ["boot"]
    assert row.uuid == row.disk.uuid == uuid and row.disk.name == "data"
    path = local(cl, row.disk.logical_id)
    # The file left the instance's directory for the storage directory itself.
    assert not old_path.exists() and path.parent == cl.node(1).paths.file_storage_dir
    assert path.read_bytes().startswith(MARKER)
    # The configuration keeps it: a fresh load of the store finds it.
    store = SqliteConfigStore(cl.paths.config_db)
    try:
        loaded = ConfigManager(store, await store.load())
        assert [r.disk.name for r in loaded.detached_disks()] == ["data"]
    finally:
        await store.close()


async def test_config_data_lists_a_detached_disk_in_its_disks_table(
    cl: InProcessCluster,
) -> None:
    row = await detach_data(cl)
    await cl.export.written(cl.cfg.serial)
    data = json.loads(cl.paths.config_data.read_text())
    entry = data["disks"][row.uuid]
    assert entry["name"] == "data" and entry["size"] == 8 and entry["dev_type"] == "file"
    assert entry["logical_id"] == row.disk.logical_id
    assert all(row.uuid not in i["disks"] for i in data["instances"].values())


async def test_cluster_verify_knows_a_detached_disk(cl: InProcessCluster) -> None:
    """Its file is no orphan ("volume ... is unknown")."""
    await detach_data(cl)
    job = await cl.run({"OP_ID": "OP_CLUSTER_VERIFY_GROUP", "group_name": "default"})
    assert job.status == SUCCESS, job.error
    assert [line for line in job.log if "is unknown" in line] == []


async def test_attach_by_name_at_an_index_renumbers_and_keeps_the_data(
    cl: InProcessCluster,
) -> None:
    row = await detach_data(cl)
    job = await cl.run(modify(INST, ["attach", 0, {"name": "data"}]))
    assert job.status == SUCCESS, job.error
    assert job.result == [["disk/0", "attach:size=8,mode=rw"]]
    disks = inst(cl).disks
    assert [(d.name, d.iv_name) for d in disks] == [("data", "disk/0"), ("boot", "disk/1")]
    assert disks[0].uuid == row.uuid and detached(cl) == []
    path = local(cl, disks[0].logical_id)
    assert path.parent.name == INST and path.read_bytes().startswith(MARKER)
    assert not local(cl, row.disk.logical_id).exists()


async def test_attach_by_uuid_to_another_instance_after_the_first_is_removed(
    cl: InProcessCluster,
) -> None:
    row = await detach_data(cl)
    job = await cl.run({"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": INST})
    assert job.status == SUCCESS, job.error
    # Removing the instance left the detached disk and its file alone.
    assert detached(cl) == [row] and local(cl, row.disk.logical_id).exists()
    job = await cl.run(modify(OTHER, ["attach", -1, {"uuid": row.uuid}]))
    assert job.status == SUCCESS, job.error
    disks = inst(cl, OTHER).disks
    assert [(d.name, d.iv_name) for d in disks] == [("other", "disk/0"), ("data", "disk/1")]
    path = local(cl, disks[1].logical_id)
    assert path.parent.name == OTHER and path.read_bytes().startswith(MARKER)


async def test_legacy_detach_takes_the_last_disk(cl: InProcessCluster) -> None:
    job = await cl.run(modify(INST, ["detach", {}]))
    assert job.status == SUCCESS, job.error
    assert [r.disk.name for r in detached(cl)] == ["data"]


async def test_the_file_moves_on_the_primary_node_of_the_instance(
    cl: InProcessCluster,
) -> None:
    job = await cl.run(modify(REMOTE, ["detach", 0, {}]))
    assert job.status == SUCCESS, job.error
    (row,) = detached(cl)
    assert local(cl, row.disk.logical_id, node=2).exists()
    job = await cl.run(modify(REMOTE, ["attach", -1, {"name": "remote"}]))
    assert job.status == SUCCESS, job.error
    assert local(cl, inst(cl, REMOTE).disks[0].logical_id, node=2).exists()
    assert cl.disk_files(1) == sorted(
        str(local(cl, d.logical_id).relative_to(cl.node(1).paths.file_storage_dir))
        for name in (INST, OTHER)
        for d in inst(cl, name).disks
    )


async def refused(cl: InProcessCluster, op: dict[str, Any], message: str, code: str) -> None:
    """``op`` fails with ``message`` (its start) and changes nothing."""
    before = (cl.cfg.serial, cl.disk_files(1), cl.disk_files(2))
    job = await cl.run(op)
    assert job.status == ERROR
    assert job.error.startswith(message), job.error
    assert job.result[1][1] == code
    assert (cl.cfg.serial, cl.disk_files(1), cl.disk_files(2)) == before


async def test_detaching_from_a_running_instance_is_refused(cl: InProcessCluster) -> None:
    job = await cl.run({"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": INST})
    assert job.status == SUCCESS, job.error
    await refused(
        cl,
        modify(INST, ["detach", 1, {}]),
        f"Instance {INST} is running, can't detach a disk from a running instance without"
        " using hotplug",
        C.ECODE_STATE,
    )


async def test_hotplug_is_refused_or_skipped(cl: InProcessCluster) -> None:
    """As Ganeti's with its fake hypervisor: no hypervisor hotplugs, so
    --hotplug is refused and hotplug_if_possible warns and goes on without it
    (burnin's way)."""
    await refused(
        cl,
        modify(INST, ["detach", -1, {}], hotplug=True),
        "Hotplug is not possible: Hotplug is not supported: Hotplug is not supported by this"
        " hypervisor",
        C.ECODE_STATE,
    )
    job = await cl.run(modify(INST, ["detach", -1, {}], hotplug_if_possible=True))
    assert job.status == SUCCESS, job.error
    assert job.result == [["disk/1", "detach"]]
    assert " - WARNING: Hotplug is not supported: Hotplug is not supported by this hypervisor" in (
        job.log
    )


@pytest.mark.parametrize(
    ("params", "message", "code"),
    [
        ({"name": "nosuch"}, "No disk was found with this name: nosuch", C.ECODE_INVAL),
        ({"uuid": "0000"}, "No disk was found with this UUID: 0000", C.ECODE_INVAL),
        ({"name": "other"}, f"Disk other already attached to instance {OTHER}", C.ECODE_STATE),
        (
            {"name": "data", "size": 4},
            "Only one argument is permitted in attach op, either name or uuid",
            C.ECODE_INVAL,
        ),
    ],
)
async def test_attaching_an_unknown_or_attached_disk_is_refused(
    cl: InProcessCluster, params: dict[str, Any], message: str, code: str
) -> None:
    await refused(cl, modify(INST, ["attach", -1, params]), message, code)


async def test_attaching_to_an_instance_on_other_nodes_is_refused(cl: InProcessCluster) -> None:
    await detach_data(cl)
    await refused(
        cl,
        modify(REMOTE, ["attach", -1, {"name": "data"}]),
        f"Disk nodes are ['{NODE1}'] while the instance's nodes are ['{NODE2}']",
        C.ECODE_INVAL,
    )
    assert len(detached(cl)) == 1


async def test_attaching_to_an_instance_of_another_template_is_refused(
    cl: InProcessCluster,
) -> None:
    job = await cl.run(create("diskless.example.com", NODE1, [], template="diskless"))
    assert job.status == SUCCESS, job.error
    await detach_data(cl)
    await refused(
        cl,
        modify("diskless.example.com", ["attach", -1, {"name": "data"}]),
        "Instance has 'diskless' template while disk has 'file' template",
        C.ECODE_INVAL,
    )


@pytest.mark.parametrize(
    ("mod", "message"),
    [
        (["detach", 0, {"size": 4}], "No settings should be passed when removing or detaching"),
        (["attach", "data", {"name": "data"}], "Only positive integer or -1 is accepted"),
        (["attach", 5, {"name": "data"}], "Got disk index 5, but there are only 2"),
    ],
)
async def test_bad_detach_and_attach_requests_are_refused(
    cl: InProcessCluster, mod: list[Any], message: str
) -> None:
    await refused(cl, modify(INST, mod), message, C.ECODE_INVAL)


async def test_nics_cannot_be_detached(cl: InProcessCluster) -> None:
    job = await cl.run(
        {"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": INST, "nics": [["detach", -1, {}]]}
    )
    assert job.status == ERROR
    assert job.error == "Detach operation is not supported for NICs"
