"""The mirrored template through the real logical units, on real nodes
in-process (issue 26): an instance's disk made on its primary and its
secondary node, the OS scripts' writes reaching both copies (a real
qemu-storage-daemon on each node, NBD over TLS under the cluster CA between
them), Ganeti's ``drbd`` asking for it, what is refused (and changes
nothing), and an add its secondary fails half-way rolled back on both nodes.
See tests/helpers/inprocess.py."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import testbed
from corral.cmdlib import intents
from corral.hook_scripts import hooks_subdir
from corral.node.storage import qsd
from corral.objects import Instance
from corral.rpc.calls_storage import blockdev_create, blockdev_grow
from tests.helpers.inprocess import OS_NAME, InProcessCluster, in_process_cluster, node_address
from tests.helpers.kvm_guest import kill_mirror_daemons
from tests.helpers.osdef import make_os
from tests.helpers.waiting import wait_until_async

INST = "db.example.com"
NODE1, NODE2, NODE3 = (testbed.node_name(i) for i in (1, 2, 3))
SUCCESS, ERROR = C.JOB_STATUS_SUCCESS, C.JOB_STATUS_ERROR
MIB = 1024 * 1024
# The create script writes a mark at the start and 1 MiB of the instance's
# bytes at 3 MiB: what both copies must then hold.
CREATE = """#!/bin/sh
set -e
printf 'MIRROR %s' "$INSTANCE_NAME" | dd of="$DISK_0_PATH" conv=notrunc,fsync 2>/dev/null
head -c 1048576 /dev/urandom | dd of="$DISK_0_PATH" bs=1M seek=3 conv=notrunc,fsync 2>/dev/null
"""

RENAME = """#!/bin/sh
printf 'RENAMED %s' "$INSTANCE_NAME" | dd of="$DISK_0_PATH" conv=notrunc,fsync 2>/dev/null
"""


@pytest.fixture
async def cl() -> AsyncIterator[InProcessCluster]:
    """Three nodes on a /24 of their own (the secondaries' exports listen on
    it: a concurrent run of these tests must not share it), mirrored enabled;
    in a short root (the exports' QMP sockets are named by disk uuid)."""
    root = Path(tempfile.mkdtemp(prefix="mir", dir="/tmp"))
    net = f"127.{random.randint(1, 254)}.{random.randint(1, 254)}"
    try:
        async with _cluster(root, net) as cluster:
            yield cluster
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.asynccontextmanager
async def _cluster(root: Path, net: str) -> AsyncIterator[InProcessCluster]:
    async with in_process_cluster(root, nodes=3, net=net) as cluster:
        for index in (2, 3):
            make_os(cluster.node(index).paths, OS_NAME, variants=None, scripts={"create": CREATE})
        job = await cluster.run(
            {
                "OP_ID": "OP_CLUSTER_SET_PARAMS",
                "enabled_disk_templates": ["file", "mirrored", "diskless"],
                "ipolicy": {"disk-templates": ["file", "drbd", "diskless"]},
            }
        )
        assert job.status == SUCCESS, job.error
        try:
            yield cluster
        finally:
            for index in (1, 2, 3):  # what a failing test may have left running
                kill_mirror_daemons(cluster.node(index).paths.run_dir)


def create(name: str = INST, template: str = "mirrored", **fields: Any) -> dict[str, Any]:
    """OP_INSTANCE_CREATE of a started instance, one 8 MiB disk on node2:node3."""
    return {
        "OP_ID": "OP_INSTANCE_CREATE",
        "instance_name": name,
        "mode": "create",
        "disk_template": template,
        "disks": [{"size": 8}],
        "nics": [],
        "os_type": OS_NAME,
        "pnode": NODE2,
        "snode": NODE3,
        "name_check": False,
        "ip_check": False,
        **fields,
    }


def copies(cl: InProcessCluster, inst: Instance) -> list[Path]:
    """The disk's file on each of its nodes (node2's, then node3's)."""
    [disk] = inst.disks
    [data] = disk.children
    return [cl.node(i).paths.from_wire(data.logical_id[1]) for i in (2, 3)]


def state(cl: InProcessCluster) -> dict[str, Any]:
    """What "nothing changed" compares."""
    return {
        "serial": cl.cfg.serial,
        "instances": sorted(i.name for i in cl.cfg.instances()),
        "disks": [cl.disk_files(i) for i in (1, 2, 3)],
        "running": [cl.running(i) for i in (1, 2, 3)],
        "records": intents.pending(cl.durable),
    }


async def refused(cl: InProcessCluster, op: dict[str, Any], error: str) -> None:
    """``op`` fails with ``error`` and changes nothing."""
    before = state(cl)
    job = await cl.run(op)
    assert job.status == ERROR
    assert job.error == error
    assert state(cl) == before


async def test_the_os_writes_both_copies_and_remove_takes_both(cl: InProcessCluster) -> None:
    job = await cl.run(create(template="drbd"))  # Ganeti's name for it
    assert job.status == SUCCESS, job.error
    inst = cl.instance(INST)
    assert inst is not None and inst.disk_template == "mirrored"
    n2, n3 = cl.config_node(2).uuid, cl.config_node(3).uuid
    assert (inst.primary_node, inst.secondary_nodes) == (n2, [n3])
    [disk] = inst.disks
    assert disk.nodes == [n2, n3] and disk.logical_id[:2] == [n2, n3]
    primary, secondary = copies(cl, inst)
    data = primary.read_bytes()
    assert data.startswith(f"MIRROR {INST}".encode()) and len(data) == 8 * MIB
    assert data[3 * MIB : 4 * MIB] != bytes(MIB)
    assert secondary.read_bytes() == data
    # The secondary exports its copy while the instance is up; the
    # primary's scripts' export is gone with them.
    assert qsd.running(cl.node(3).paths, disk.uuid, "nbd") is not None
    assert qsd.running(cl.node(2).paths, disk.uuid, "fuse") is None
    assert cl.running(2) == [INST] and cl.running(3) == []

    job = await cl.run({"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": INST})
    assert job.status == SUCCESS, job.error
    assert not primary.exists() and not secondary.exists()
    assert qsd.running(cl.node(3).paths, disk.uuid, "nbd") is None
    assert cl.disk_files(2) == cl.disk_files(3) == []


async def test_each_disk_takes_its_own_port(cl: InProcessCluster) -> None:
    for name in ("a.example.com", "b.example.com"):
        job = await cl.run(create(name, start=False, disks=[{"size": 4}, {"size": 4}]))
        assert job.status == SUCCESS, job.error
    ports = [int(d.logical_id[2]) for i in cl.cfg.instances() for d in i.disks]
    assert len(set(ports)) == 4 and min(ports) >= 11000


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        (
            {"snode": None},
            "The mirrored template needs 1 secondary node(s), 0 given (-n PNODE:SNODE)",
        ),
        ({"snode": NODE2}, "The secondary node cannot be the primary node"),
        ({"snode": "nonexisting"}, "Node 'nonexisting' not known"),
        (
            {"template": "file"},
            "The file template keeps its disks on the primary node only: give no secondary"
            " node (-n PNODE, not -n PNODE:SNODE)",
        ),
    ],
)
async def test_bad_placements_are_refused_and_change_nothing(
    cl: InProcessCluster, fields: dict[str, Any], error: str
) -> None:
    before = state(cl)
    template = fields.pop("template", "mirrored")
    job = await cl.run(create(template=template, **fields))
    assert job.status == ERROR
    assert job.error == error
    assert state(cl) == before


async def test_an_offline_secondary_is_refused(cl: InProcessCluster) -> None:
    job = await cl.run({"OP_ID": "OP_NODE_SET_PARAMS", "node_name": NODE3, "offline": True})
    assert job.status == SUCCESS, job.error
    await refused(cl, create(), f"Cannot use offline secondary node '{NODE3}'")


async def test_an_add_its_secondary_fails_is_undone_on_both_nodes(cl: InProcessCluster) -> None:
    before = state(cl)
    cl.node(3).go_down_at(blockdev_create, ran=True)
    job = await cl.run(create())
    assert job.status == ERROR
    refused = f"Cannot connect to {node_address(3, cl.net)}: Connection refused"
    assert job.error == f"Could not create a disk for instance {INST} on node {NODE3}: {refused}"
    # The primary's copy went at once; the secondary's once it answers again.
    assert cl.disk_files(2) == [] and len(cl.disk_files(3)) == 1
    cl.node(3).reachable = True
    await wait_until_async(
        lambda: not cl.disk_files(3) and not intents.pending(cl.durable),
        timeout=20,
        what="the background settlement on the secondary",
    )
    assert state(cl) == {**before, "serial": cl.cfg.serial}


async def test_a_reinstall_and_a_rename_write_both_copies(cl: InProcessCluster) -> None:
    job = await cl.run(create(start=False))
    assert job.status == SUCCESS, job.error
    inst = cl.instance(INST)
    assert inst is not None
    primary, secondary = copies(cl, inst)
    first = primary.read_bytes()
    # The secondary's export stopped (deactivate-disks): a reinstall starts it again.
    job = await cl.run({"OP_ID": "OP_INSTANCE_DEACTIVATE_DISKS", "instance_name": INST})
    assert job.status == SUCCESS, job.error
    assert qsd.running(cl.node(3).paths, inst.disks[0].uuid, "nbd") is None
    job = await cl.run({"OP_ID": "OP_INSTANCE_REINSTALL", "instance_name": INST})
    assert job.status == SUCCESS, job.error
    again = primary.read_bytes()
    assert again != first and secondary.read_bytes() == again
    for index in (2, 3):
        make_os(
            cl.node(index).paths,
            OS_NAME,
            variants=None,
            scripts={"create": CREATE, "rename": RENAME},
        )
    job = await cl.run(
        {
            "OP_ID": "OP_INSTANCE_RENAME",
            "instance_name": INST,
            "new_name": "db2.example.com",
            "name_check": False,
            "ip_check": False,
        }
    )
    assert job.status == SUCCESS, job.error
    assert not any("WARNING" in line for line in job.log), job.log
    data = primary.read_bytes()
    assert data.startswith(b"RENAMED db2.example.com") and secondary.read_bytes() == data


def committed(cl: InProcessCluster) -> Instance:
    """The instance as committed now (it must exist)."""
    inst = cl.instance(INST)
    assert inst is not None
    return inst


async def created(cl: InProcessCluster, **fields: Any) -> Instance:
    """The instance :func:`create` makes, as committed."""
    job = await cl.run(create(**fields))
    assert job.status == SUCCESS, job.error
    return committed(cl)


def failover(**fields: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": INST, **fields}


async def test_a_failover_swaps_the_roles_and_both_copies_stay_written(
    cl: InProcessCluster,
) -> None:
    inst = await created(cl)
    n2, n3 = cl.config_node(2).uuid, cl.config_node(3).uuid
    [disk] = inst.disks
    job = await cl.run(failover())
    assert job.status == SUCCESS, job.error
    assert "* checking disk consistency between source and target" in job.log
    inst = committed(cl)
    assert (inst.primary_node, inst.secondary_nodes) == (n3, [n2])
    [moved] = inst.disks
    assert moved.nodes == [n3, n2] and moved.logical_id == [n3, n2, disk.logical_id[2]]
    assert moved.children[0].nodes == [n3, n2] and moved.outdated == []
    assert cl.running(3) == [INST] and cl.running(2) == []
    # Node2 exports its copy now, node3's export is gone.
    assert qsd.running(cl.node(2).paths, disk.uuid, "nbd") is not None
    assert qsd.running(cl.node(3).paths, disk.uuid, "nbd") is None
    # The OS scripts on node3 write both copies.
    job = await cl.run({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": INST})
    assert job.status == SUCCESS, job.error
    job = await cl.run({"OP_ID": "OP_INSTANCE_REINSTALL", "instance_name": INST})
    assert job.status == SUCCESS, job.error
    on2, on3 = copies(cl, inst)
    data = on3.read_bytes()
    assert data.startswith(f"MIRROR {INST}".encode()) and on2.read_bytes() == data


async def test_a_failover_goes_to_the_secondary_only_and_never_to_an_outdated_copy(
    cl: InProcessCluster,
) -> None:
    job = await cl.run(create())
    assert job.status == SUCCESS, job.error
    await refused(
        cl,
        failover(target_node=NODE1),
        "Instances with disk types mirrored cannot be failed over to arbitrary nodes"
        " (neither an iallocator nor a target node can be passed)",
    )
    await outdate_secondary(cl)
    await refused(cl, failover(), "Disk 0 is degraded on target node, aborting failover")
    assert cl.running(2) == [INST]
    # verify-disks names it (its disks need activate-disks: a resync), and
    # cluster verify says it is degraded (Ganeti's words for DRBD's).
    job = await cl.run({"OP_ID": "OP_GROUP_VERIFY_DISKS", "group_name": "default"})
    assert job.status == SUCCESS, job.error
    assert job.result == [{}, [INST], {}]
    job = await cl.run({"OP_ID": "OP_CLUSTER_VERIFY_GROUP", "group_name": "default"})
    assert job.status == SUCCESS, job.error
    degraded = [line for line in job.log if "is degraded" in line]
    assert degraded == [
        f"  - WARNING: instance {INST}: disk/0 on {NODE2} is degraded; local disk state is 'ok'",
        f"  - ERROR: instance {INST}: disk/0 on {NODE3} is degraded; local disk state is 'faulty'",
    ], job.log


async def outdate_secondary(cl: InProcessCluster) -> None:
    """Commit the secondary's copy as outdated (as the master records a failed secondary)."""
    behind = committed(cl).copy_for_update()
    assert isinstance(behind, Instance)
    behind.disks[0].outdated = list(behind.secondary_nodes)
    tx = cl.cfg.transaction()
    tx.update(behind)
    await tx.commit()


async def test_a_migration_swaps_the_roles_and_goes_to_a_current_copy_only(
    cl: InProcessCluster,
) -> None:
    inst = await created(cl)
    n2, n3 = cl.config_node(2).uuid, cl.config_node(3).uuid
    [disk] = inst.disks
    migrate = {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": INST}
    await refused(
        cl,
        {**migrate, "target_node": NODE1},
        "Instances with disk types mirrored cannot be migrated to arbitrary nodes"
        " (neither an iallocator nor a target node can be passed)",
    )
    job = await cl.run(migrate)
    assert job.status == SUCCESS, job.error
    inst = committed(cl)
    assert (inst.primary_node, inst.secondary_nodes) == (n3, [n2])
    [moved] = inst.disks
    assert moved.nodes == [n3, n2] and moved.logical_id == [n3, n2, disk.logical_id[2]]
    assert moved.outdated == [] and moved.generation == disk.generation
    assert cl.running(3) == [INST] and cl.running(2) == []
    assert qsd.running(cl.node(2).paths, disk.uuid, "nbd") is not None
    assert qsd.running(cl.node(3).paths, disk.uuid, "nbd") is None
    # Never to a copy that is behind (Ganeti's words for DRBD's).
    await outdate_secondary(cl)
    before = state(cl)
    job = await cl.run(migrate)
    assert job.status == ERROR
    assert job.error == (
        "Disk 0 is degraded or not fully synchronized on target node, aborting migration"
    )
    assert state(cl) == before and cl.running(3) == [INST]


async def test_a_failover_from_a_dead_primary_outdates_its_copy_first(
    cl: InProcessCluster,
) -> None:
    inst = await created(cl)
    n2, n3 = cl.config_node(2).uuid, cl.config_node(3).uuid
    generation = inst.disks[0].generation
    cl.node(2).reachable = False
    before = state(cl)
    job = await cl.run(failover())
    assert job.status == ERROR
    assert job.error.startswith(f"Could not shutdown instance {INST} on node {NODE2}")
    # Nothing changed (but the record of the failover that did not start,
    # kept until node2 answers: the instance must run there again).
    assert {**state(cl), "records": []} == {**before, "records": []}
    job = await cl.run(failover(ignore_consistency=True))
    assert job.status == SUCCESS, job.error
    assert any(f"please make sure node {NODE2} is down" in line for line in job.log), job.log
    inst = committed(cl)
    [disk] = inst.disks
    assert (inst.primary_node, disk.nodes, disk.outdated) == (n3, [n3, n2], [n2])
    assert disk.generation == generation + 1
    assert cl.running(3) == [INST]
    # The OS scripts write node3's copy alone; node2's stays as it was.
    job = await cl.run({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": INST})
    assert job.status == SUCCESS, job.error
    on2, on3 = copies(cl, inst)
    old = on2.read_bytes()
    job = await cl.run({"OP_ID": "OP_INSTANCE_REINSTALL", "instance_name": INST})
    assert job.status == SUCCESS, job.error
    assert on3.read_bytes() != old and on2.read_bytes() == old
    # Back to node2 is refused: its copy is behind.
    cl.node(2).reachable = True
    job = await cl.run(failover())
    assert job.status == ERROR
    assert job.error == "Disk 0 is degraded on target node, aborting failover"
    # activate-disks copies the stopped instance's copy whole; then it may.
    job = await cl.run({"OP_ID": "OP_INSTANCE_ACTIVATE_DISKS", "instance_name": INST})
    assert job.status == SUCCESS, job.error
    assert f"* Instance {INST}'s disks are in sync" in job.log
    assert on2.read_bytes() == on3.read_bytes()
    inst = committed(cl)
    assert (inst.disks[0].outdated, inst.disks[0].generation) == ([], generation + 2)
    job = await cl.run(failover())
    assert job.status == SUCCESS, job.error
    assert committed(cl).primary_node == n2


def replace(mode: str, **fields: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_INSTANCE_REPLACE_DISKS", "instance_name": INST, "mode": mode, **fields}


async def test_replace_disks_makes_new_copies_on_the_secondary_or_a_new_node(
    cl: InProcessCluster,
) -> None:
    job = await cl.run(create(start=False))
    assert job.status == SUCCESS, job.error
    inst = committed(cl)
    n1, n2 = cl.config_node(1).uuid, cl.config_node(2).uuid
    [disk] = inst.disks
    on2, on3 = copies(cl, inst)
    data = on2.read_bytes()
    on3.write_bytes(bytes(len(data)))  # node3's copy lost its data
    job = await cl.run(replace("replace_on_secondary"))
    assert job.status == SUCCESS, job.error
    assert job.log[:3] == [
        f"Replacing disk(s) 0 for instance '{INST}'",
        f"Current primary node: {NODE2}",
        f"Current secondary node: {NODE3}",
    ]
    assert on3.read_bytes() == data
    assert committed(cl).disks[0].generation == disk.generation + 2

    # The hooks as Ganeti's for replace-disks (here node1's, the master's and the new secondary's).
    hooks = cl.node(1).paths.hooks_dir / hooks_subdir("mirrors-replace", C.HOOKS_PHASE_PRE)
    hooks.mkdir(parents=True)
    seen = cl.node(1).paths.root / "hook-env"
    (hooks / "10-env").write_text(f"#!/bin/sh\nenv > {seen}\n")
    (hooks / "10-env").chmod(0o755)
    job = await cl.run(replace("replace_new_secondary", remote_node=NODE1))
    assert job.status == SUCCESS, job.error
    env = dict(line.split("=", 1) for line in seen.read_text().splitlines() if "=" in line)
    assert {key: env.get(key) for key in ("GANETI_OP_CODE", "GANETI_HOOKS_PATH", "GANETI_MODE",
            "GANETI_NEW_SECONDARY", "GANETI_OLD_SECONDARY", "GANETI_INSTANCE_NAME")} == {
        "GANETI_OP_CODE": "OP_INSTANCE_REPLACE_DISKS",
        "GANETI_HOOKS_PATH": "mirrors-replace",
        "GANETI_MODE": "replace_new_secondary",
        "GANETI_NEW_SECONDARY": NODE1,
        "GANETI_OLD_SECONDARY": NODE3,
        "GANETI_INSTANCE_NAME": INST,
    }  # fmt: skip
    inst = committed(cl)
    [moved] = inst.disks
    assert (inst.primary_node, inst.secondary_nodes) == (n2, [n1])
    assert moved.nodes == [n2, n1] and moved.logical_id == [n2, n1, disk.logical_id[2]]
    assert moved.outdated == []
    on1 = cl.node(1).paths.from_wire(moved.children[0].logical_id[1])
    assert on1.read_bytes() == data and not on3.exists()
    assert cl.disk_files(3) == []
    # The new secondary exports its copy; the old one nothing.
    assert qsd.running(cl.node(1).paths, disk.uuid, "nbd") is not None
    assert qsd.running(cl.node(3).paths, disk.uuid, "nbd") is None
    # And the OS scripts now write node2's and node1's copies.
    job = await cl.run({"OP_ID": "OP_INSTANCE_REINSTALL", "instance_name": INST})
    assert job.status == SUCCESS, job.error
    assert on1.read_bytes() == on2.read_bytes() != data


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        (
            {"mode": "replace_new_secondary", "remote_node": NODE2},
            "The specified node is the primary node of the instance",
        ),
        (
            {"mode": "replace_new_secondary", "remote_node": NODE3},
            "The specified node is already the secondary node of the instance",
        ),
        (
            {"mode": "replace_new_secondary"},
            "When changing the secondary either an iallocator script must be used or the new"
            " node given",
        ),
        (
            {"mode": "replace_on_secondary", "remote_node": NODE1},
            "The iallocator and new node options can only be used when changing the secondary node",
        ),
        (
            {"mode": "replace_on_secondary", "disks": [1]},
            "Invalid disk index 1 (the instance has 1)",
        ),
        (
            {"mode": "replace_auto"},
            f"Please run activate-disks on instance {INST} first",
        ),
    ],
)
async def test_bad_replace_disks_are_refused_and_change_nothing(
    cl: InProcessCluster, fields: dict[str, Any], error: str
) -> None:
    job = await cl.run(create(start=False))
    assert job.status == SUCCESS, job.error
    await refused(cl, replace(**fields), error)


async def test_replace_disks_of_a_file_instance_is_refused(cl: InProcessCluster) -> None:
    job = await cl.run(create(template="file", snode=None, start=False))
    assert job.status == SUCCESS, job.error
    job = await cl.run(replace("replace_on_secondary"))
    assert job.status == ERROR
    assert job.error == "Can only run replace disks for mirrored instances"


async def test_evacuating_a_secondary_node_replaces_its_copies_on_the_new_one(
    cl: InProcessCluster,
) -> None:
    job = await cl.run(create(start=False))
    assert job.status == SUCCESS, job.error
    job = await cl.run(
        {
            "OP_ID": "OP_NODE_EVACUATE",
            "node_name": NODE3,
            "mode": "secondary-only",
            "remote_node": NODE1,
        }
    )
    assert job.status == SUCCESS, job.error
    [[submitted, job_id]] = job.result["jobs"]
    assert submitted
    replaced = await cl.wait(job_id)
    assert replaced.status == SUCCESS, replaced.error
    inst = cl.instance(INST)
    assert inst is not None and inst.secondary_nodes == [cl.config_node(1).uuid]
    assert cl.disk_files(3) == [] and len(cl.disk_files(1)) == 1


async def test_the_allocator_chooses_a_new_secondary_and_evacuates_one(
    cl: InProcessCluster,
) -> None:
    job = await cl.run(create(start=False))
    assert job.status == SUCCESS, job.error
    # -I: the one node left, in the primary's group with room for the copies.
    job = await cl.run(replace("replace_new_secondary", iallocator="hail"))
    assert job.status == SUCCESS, job.error
    assert f" - INFO: Selected new secondary for instance '{INST}': {NODE1}" in job.log
    inst = committed(cl)
    assert inst.secondary_nodes == [cl.config_node(1).uuid]
    assert cl.disk_files(3) == [] and len(cl.disk_files(1)) == 1
    # gnt-node evacuate -s without a node: the allocator's replace-disks job.
    job = await cl.run({"OP_ID": "OP_NODE_EVACUATE", "node_name": NODE1, "mode": "secondary-only"})
    assert job.status == SUCCESS, job.error
    [[submitted, job_id]] = job.result["jobs"]
    assert submitted
    replaced = await cl.wait(job_id)
    assert replaced.status == SUCCESS, replaced.error
    assert committed(cl).secondary_nodes == [cl.config_node(3).uuid]
    assert cl.disk_files(1) == [] and len(cl.disk_files(3)) == 1
    # Its primary evacuated: to its secondary (which keeps a copy).
    job = await cl.run({"OP_ID": "OP_NODE_EVACUATE", "node_name": NODE2, "mode": "primary-only"})
    assert job.status == SUCCESS, job.error
    [[submitted, job_id]] = job.result["jobs"]
    moved = await cl.wait(job_id)
    assert moved.status == SUCCESS, moved.error
    inst = committed(cl)
    assert (inst.primary_node, inst.secondary_nodes) == (
        cl.config_node(3).uuid,
        [cl.config_node(2).uuid],
    )


async def test_replace_disks_on_the_primary_copies_the_secondarys_whole(
    cl: InProcessCluster,
) -> None:
    inst = await created(cl)
    n2 = cl.config_node(2).uuid
    generation = inst.disks[0].generation
    await refused(
        cl,
        replace("replace_on_primary"),
        f"Instance {INST} is running: replacing the primary node's copies of a running"
        " mirrored instance is not supported yet; stop it, or fail it over and replace them"
        " on its secondary (-s)",
    )
    job = await cl.run({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": INST})
    assert job.status == SUCCESS, job.error
    on2, on3 = copies(cl, inst)
    data = on3.read_bytes()
    assert data.startswith(f"MIRROR {INST}".encode()) and on2.read_bytes() == data
    # The primary's copy went bad; as a half-done -p leaves it: outdated.
    on2.write_bytes(b"\xff" * len(data))
    half = committed(cl).copy_for_update()
    assert isinstance(half, Instance)
    half.disks[0].outdated = [n2]
    tx = cl.cfg.transaction()
    tx.update(half)
    await tx.commit()
    job = await cl.run({"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": INST})
    assert job.status == ERROR
    assert job.error == (
        f"Disk 0's copy on the primary node {NODE2} is outdated; replace it"
        " (gnt-instance replace-disks -p) or fail over to the secondary"
    )
    assert cl.running(2) == []
    job = await cl.run(replace("replace_on_primary"))
    assert job.status == SUCCESS, job.error
    assert f"* Instance {INST}'s disks are in sync" in job.log
    assert on2.read_bytes() == data
    inst = committed(cl)
    assert inst.disks[0].outdated == [] and inst.disks[0].generation > generation
    assert (inst.primary_node, inst.secondary_nodes) == (n2, [cl.config_node(3).uuid])
    job = await cl.run({"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": INST})
    assert job.status == SUCCESS, job.error
    # Not from a secondary copy that is behind (Ganeti's words).
    job = await cl.run({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": INST})
    assert job.status == SUCCESS, job.error
    await outdate_secondary(cl)
    await refused(
        cl,
        replace("replace_on_primary"),
        f"Node {NODE3} has degraded storage, unsafe to replace disks for instance {INST}",
    )


async def test_growing_grows_every_copy_of_a_stopped_instance(cl: InProcessCluster) -> None:
    inst = await created(cl)
    size = inst.disks[0].size
    grow = {"OP_ID": "OP_INSTANCE_GROW_DISK", "instance_name": INST, "disk": 0, "amount": 64}
    await refused(
        cl,
        grow,
        f"Instance {INST} is running: the disks of a running mirrored instance cannot grow"
        " yet; stop it first",
    )
    job = await cl.run({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": INST})
    assert job.status == SUCCESS, job.error
    on2, on3 = copies(cl, inst)
    job = await cl.run(grow)
    assert job.status == SUCCESS, job.error
    [disk] = committed(cl).disks
    assert disk.size == disk.children[0].size == size + 64 and disk.outdated == []
    assert on2.stat().st_size == on3.stat().st_size == (size + 64) * MIB
    # The quorum over both (the OS scripts' writes) takes the new size.
    job = await cl.run({"OP_ID": "OP_INSTANCE_REINSTALL", "instance_name": INST})
    assert job.status == SUCCESS, job.error
    assert on2.read_bytes() == on3.read_bytes()
    # The secondary's node dies before it grows its copy: the copy is
    # behind, and grows and is filled whole when the disks are next activated.
    cl.node(3).go_down_at(blockdev_grow)
    job = await cl.run(grow)
    assert job.status == SUCCESS, job.error
    assert any(f"Could not grow the copy of disk 0 on node {NODE3}" in line for line in job.log)
    [disk] = committed(cl).disks
    assert disk.size == size + 128 and disk.outdated == [cl.config_node(3).uuid]
    assert on3.stat().st_size == (size + 64) * MIB
    cl.node(3).reachable = True
    job = await cl.run({"OP_ID": "OP_INSTANCE_ACTIVATE_DISKS", "instance_name": INST})
    assert job.status == SUCCESS, job.error
    assert committed(cl).disks[0].outdated == []
    assert on2.read_bytes() == on3.read_bytes() and on3.stat().st_size == (size + 128) * MIB
    job = await cl.run({"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": INST})
    assert job.status == SUCCESS, job.error


async def test_a_forced_failover_to_an_outdated_copy_makes_the_other_one_behind(
    cl: InProcessCluster,
) -> None:
    await created(cl)
    n2, n3 = cl.config_node(2).uuid, cl.config_node(3).uuid
    await outdate_secondary(cl)
    job = await cl.run(failover(ignore_consistency=True))
    assert job.status == SUCCESS, job.error
    inst = committed(cl)
    assert (inst.primary_node, inst.disks[0].outdated) == (n3, [n2])
    assert cl.running(3) == [INST]


def modify(**fields: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": INST, **fields}


async def test_a_file_instance_converted_to_mirrored_and_back_keeps_its_data(
    cl: InProcessCluster,
) -> None:
    inst = await created(cl, template="file", snode=None, start=False)
    [old] = inst.disks
    data = cl.node(2).paths.from_wire(old.logical_id[1]).read_bytes()
    assert data.startswith(f"MIRROR {INST}".encode())
    n2, n3 = cl.config_node(2).uuid, cl.config_node(3).uuid
    job = await cl.run(modify(disk_template="drbd", remote_node=NODE3))  # Ganeti's name
    assert job.status == SUCCESS, job.error
    inst = committed(cl)
    assert (inst.disk_template, inst.primary_node, inst.secondary_nodes) == ("mirrored", n2, [n3])
    on2, on3 = copies(cl, inst)
    assert on2.read_bytes() == on3.read_bytes() == data
    assert cl.disk_files(2) == [os.path.relpath(on2, cl.node(2).paths.file_storage_dir)]
    # And back: one copy on the primary, the secondary's gone.
    job = await cl.run(modify(disk_template="file", remote_node=NODE3))
    assert job.status == SUCCESS, job.error
    assert any("the secondary node will be ignored" in line for line in job.log), job.log
    inst = committed(cl)
    assert (inst.disk_template, inst.secondary_nodes) == ("file", [])
    [back] = inst.disks
    assert cl.node(2).paths.from_wire(back.logical_id[1]).read_bytes() == data
    assert cl.disk_files(3) == [] and len(cl.disk_files(2)) == 1
    assert qsd.running(cl.node(3).paths, inst.disks[0].uuid, "nbd") is None


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        (
            {},
            "Changing the disk template to a mirrored one needs its secondary node (-n NODE):"
            " an allocator cannot choose it yet",
        ),
        (
            {"remote_node": NODE2},
            f"Given new secondary node {NODE2} is the same as the primary node of the instance",
        ),
        ({"remote_node": "nonexisting"}, "Node 'nonexisting' not known"),
    ],
)
async def test_bad_conversions_to_mirrored_change_nothing(
    cl: InProcessCluster, fields: dict[str, Any], error: str
) -> None:
    await created(cl, template="file", snode=None, start=False)
    await refused(cl, modify(disk_template="mirrored", **fields), error)


async def test_recreate_disks_makes_each_copy_anew_only_when_all_are_gone(
    cl: InProcessCluster,
) -> None:
    inst = await created(cl, start=False)
    on2, on3 = copies(cl, inst)
    on3.unlink()
    recreate = {"OP_ID": "OP_INSTANCE_RECREATE_DISKS", "instance_name": INST}
    await refused(
        cl,
        recreate,
        f"Could not create disk 0 of instance {INST} on node {NODE2}: Disk file {on2} already"
        " exists",
    )
    on2.unlink()
    job = await cl.run(recreate)
    assert job.status == SUCCESS, job.error
    assert on2.read_bytes() == on3.read_bytes() == bytes(8 * MIB)


async def test_the_allocator_chooses_both_nodes(cl: InProcessCluster) -> None:
    inst = await created(cl, pnode=None, snode=None, iallocator="hail", start=False)
    assert len(inst.secondary_nodes) == 1 and inst.primary_node not in inst.secondary_nodes
    [disk] = inst.disks
    assert disk.nodes == [inst.primary_node, *inst.secondary_nodes]
    names = {cl.config_node(i).uuid: i for i in (1, 2, 3)}
    primary, secondary = (
        cl.node(names[uuid]).paths.from_wire(disk.children[0].logical_id[1]) for uuid in disk.nodes
    )
    assert primary.read_bytes() == secondary.read_bytes()  # what the OS wrote, on both
