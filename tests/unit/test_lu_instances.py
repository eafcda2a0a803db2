"""Instance logical units against real nodes in-process (no daemons, no mocks):
create, remove, rename, modify and failover, each done, dry-run (nothing
changes), failing half-way on a node for real or because the node goes down
in the middle (rolled back, or left as Ganeti leaves it), and retried once
the node answers again.  See tests/helpers/inprocess.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import testbed
from corral.cmdlib import intents
from corral.rpc.calls_instance import instance_rename, instance_start
from corral.rpc.calls_storage import blockdev_create, blockdev_remove, blockdev_rename
from corral.rpc.declare import NodeCall
from tests.helpers.inprocess import OS_NAME, InProcessCluster, in_process_cluster, node_address
from tests.helpers.osdef import make_os
from tests.helpers.tmpfs import tmpfs
from tests.helpers.waiting import wait_until_async

INST = "inst1.example.com"
NODE1, NODE2 = testbed.node_name(1), testbed.node_name(2)
REFUSED = f"Cannot connect to {node_address(2)}: Connection refused"
SUCCESS, ERROR = C.JOB_STATUS_SUCCESS, C.JOB_STATUS_ERROR


@pytest.fixture
async def cl(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    async with in_process_cluster(tmp_path, nodes=2) as cluster:
        yield cluster


def create(name: str = INST, **fields: Any) -> dict[str, Any]:
    """OP_INSTANCE_CREATE of a started instance with one 4 MiB file disk on node 2."""
    return {
        "OP_ID": "OP_INSTANCE_CREATE",
        "instance_name": name,
        "mode": "create",
        "disk_template": "file",
        "disks": [{"size": 4}],
        "nics": [],
        "os_type": OS_NAME,
        "pnode": NODE2,
        "name_check": False,
        "ip_check": False,
        **fields,
    }


def state(cl: InProcessCluster) -> dict[str, Any]:
    """What "nothing changed" compares: the configuration and the nodes."""
    return {
        "serial": cl.cfg.serial,
        "instances": sorted(i.name for i in cl.cfg.instances()),
        "disks": [cl.disk_files(1), cl.disk_files(2)],
        "running": [cl.running(1), cl.running(2)],
        "records": intents.pending(cl.durable),
    }


async def created(cl: InProcessCluster, **fields: Any) -> None:
    job = await cl.run(create(**fields))
    assert job.status == SUCCESS, job.error


# Create
async def test_create_makes_the_disk_runs_the_os_and_starts_the_instance(
    cl: InProcessCluster,
) -> None:
    job = await cl.run(create())
    assert job.status == SUCCESS, job.error
    assert job.result == [NODE2]
    assert "* running the instance OS create scripts..." in job.log
    inst = cl.instance(INST)
    assert inst is not None and inst.primary_node == cl.config_node(2).uuid
    [disk] = inst.disks
    assert cl.disk_files(2) == [f"{INST}/{Path(disk.logical_id[1]).name}"]
    assert cl.running(2) == [INST] and cl.disk_files(1) == cl.running(1) == []
    assert intents.pending(cl.durable) == []


async def test_create_dry_run_changes_nothing(cl: InProcessCluster) -> None:
    before = state(cl)
    job = await cl.run(create(dry_run=True))
    assert job.status == SUCCESS, job.error
    assert state(cl) == before


async def test_create_on_an_unreachable_node_is_refused_and_changes_nothing(
    cl: InProcessCluster,
) -> None:
    cl.node(2).reachable = False
    before = state(cl)
    job = await cl.run(create())
    assert job.status == ERROR
    assert job.error == f"Cannot get the OS list of node {NODE2}: {REFUSED}"
    assert state(cl) == before


async def test_create_removes_its_disks_when_the_os_script_fails(cl: InProcessCluster) -> None:
    make_os(cl.node(2).paths, OS_NAME, variants=None, scripts={"create": "#!/bin/sh\nexit 3\n"})
    before = state(cl)
    job = await cl.run(create())
    assert job.status == ERROR
    assert job.error.startswith(
        f"Could not add os for instance {INST} on node {NODE2}: OS create script failed"
        " (exit code 3)"
    )
    assert state(cl) == before


async def test_a_disk_made_by_a_node_that_went_down_goes_once_it_answers(
    cl: InProcessCluster,
) -> None:
    """Node 2 makes the disk, then goes down before answering: the add fails,
    the disk cannot be removed at once, its record keeps it; the master
    retries in the background and removes it once node 2 answers again."""
    cl.node(2).go_down_at(blockdev_create, ran=True)
    job = await cl.run(create())
    assert job.status == ERROR
    assert job.error == f"Could not create a disk for instance {INST} on node {NODE2}: {REFUSED}"
    assert any(REFUSED in line for line in job.log)  # the disk could not be removed
    assert cl.instance(INST) is None
    assert len(cl.disk_files(2)) == 1 and len(intents.pending(cl.durable)) == 1
    cl.node(2).reachable = True
    await wait_until_async(
        lambda: not cl.disk_files(2) and not intents.pending(cl.durable),
        timeout=20,
        what="the background settlement",
    )
    job = await cl.run(create())  # and the name is free again
    assert job.status == SUCCESS, job.error


# Remove
async def test_remove_stops_the_instance_and_removes_its_disks(cl: InProcessCluster) -> None:
    await created(cl)
    job = await cl.run({"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": INST})
    assert job.status == SUCCESS, job.error
    assert cl.instance(INST) is None
    assert cl.disk_files(2) == cl.running(2) == []


async def test_remove_dry_run_changes_nothing(cl: InProcessCluster) -> None:
    await created(cl)
    before = state(cl)
    job = await cl.run({"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": INST, "dry_run": True})
    assert job.status == SUCCESS, job.error
    assert state(cl) == before


async def test_remove_fails_on_an_unreachable_node_unless_failures_are_ignored(
    cl: InProcessCluster,
) -> None:
    await created(cl)
    cl.node(2).reachable = False
    before = state(cl)
    job = await cl.run({"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": INST})
    assert job.status == ERROR
    assert job.error == f"Could not shutdown instance {INST} on node {NODE2}: {REFUSED}"
    assert state(cl) == before
    job = await cl.run(
        {"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": INST, "ignore_failures": True}
    )
    assert job.status == SUCCESS, job.error
    assert cl.instance(INST) is None
    warning = f" - WARNING: Could not remove a disk of {INST} on node {NODE2}: {REFUSED}"
    assert warning in job.log
    assert len(cl.disk_files(2)) == 1  # as Ganeti: what the node holds stays there


async def test_a_remove_its_node_interrupted_is_finished_by_a_retry(cl: InProcessCluster) -> None:
    """Node 2 removes the first disk and goes down before answering: the
    instance stays with its second disk; the same remove, once node 2
    answers, finishes (a disk that is gone already is no failure)."""
    await created(cl, disks=[{"size": 4}, {"size": 4}])
    cl.node(2).go_down_at(blockdev_remove, ran=True)
    remove = {"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": INST}
    job = await cl.run(remove)
    assert job.status == ERROR
    assert job.error == f"Could not remove a disk of {INST} on node {NODE2}: {REFUSED}"
    assert cl.instance(INST) is not None and len(cl.disk_files(2)) == 1
    cl.node(2).reachable = True
    job = await cl.run(remove)
    assert job.status == SUCCESS, job.error
    assert cl.instance(INST) is None and cl.disk_files(2) == []


# Rename
def rename_op() -> dict[str, Any]:
    return {
        "OP_ID": "OP_INSTANCE_RENAME",
        "instance_name": INST,
        "new_name": "inst2.example.com",
        "name_check": False,
        "ip_check": False,
    }


async def test_rename_moves_the_disks_and_renames_in_the_config(cl: InProcessCluster) -> None:
    await created(cl, start=False)
    op = rename_op()
    dry = await cl.run({**op, "dry_run": True})
    assert dry.status == SUCCESS, dry.error
    assert cl.instance(INST) is not None and cl.disk_files(2)[0].startswith(f"{INST}/")
    job = await cl.run(op)
    assert job.status == SUCCESS, job.error
    assert cl.instance(INST) is None
    inst = cl.instance("inst2.example.com")
    assert inst is not None
    [disk] = inst.disks
    assert cl.disk_files(2) == [f"inst2.example.com/{Path(disk.logical_id[1]).name}"]


@pytest.mark.parametrize("step", [instance_rename, blockdev_rename], ids=lambda call: call.name)
async def test_a_rename_its_node_fails_changes_nothing_and_can_be_retried(
    cl: InProcessCluster, step: NodeCall[..., None]
) -> None:
    await created(cl, start=False)
    before = state(cl)
    cl.node(2).go_down_at(step)
    job = await cl.run(rename_op())
    assert job.status == ERROR and job.error.endswith(f"on node {NODE2}: {REFUSED}")
    assert state(cl) == before
    cl.node(2).reachable = True
    job = await cl.run(rename_op())
    assert job.status == SUCCESS, job.error
    assert cl.instance(INST) is None and cl.instance("inst2.example.com") is not None
    assert cl.disk_files(2)[0].startswith("inst2.example.com/")


@pytest.mark.parametrize("step", [instance_rename, blockdev_rename], ids=lambda call: call.name)
async def test_a_rename_to_the_own_name_succeeds_and_moves_nothing(
    cl: InProcessCluster, step: NodeCall[..., None]
) -> None:
    """As Ganeti's (its burnin does it): accepted, nothing renamed on the node
    (the node going down at ``step`` would fail the job)."""
    await created(cl, start=False)
    before = state(cl)
    cl.node(2).go_down_at(step)
    job = await cl.run({**rename_op(), "new_name": INST})
    assert job.status == SUCCESS, job.error
    assert job.result == INST
    assert state(cl) == before


async def test_rename_of_a_running_instance_is_refused(cl: InProcessCluster) -> None:
    await created(cl)
    before = state(cl)
    job = await cl.run(rename_op())
    assert job.status == ERROR
    assert job.error == f"Instance '{INST}' is running; shut it down before renaming it"
    assert state(cl) == before


# Modify
def add_disks(count: int, **fields: Any) -> dict[str, Any]:
    disks = [["add", {"size": 4}] for _ in range(count)]
    return {"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": INST, "disks": disks, **fields}


async def test_modify_adds_disks_on_the_node(cl: InProcessCluster) -> None:
    await created(cl)
    before = state(cl)
    dry = await cl.run(add_disks(2, dry_run=True))
    assert dry.status == SUCCESS, dry.error
    assert state(cl) == before
    job = await cl.run(add_disks(2))
    assert job.status == SUCCESS, job.error
    inst = cl.instance(INST)
    assert inst is not None and len(inst.disks) == 3
    assert len(cl.disk_files(2)) == 3


async def test_modify_removes_the_disks_it_made_when_the_node_runs_out_of_room(
    cl: InProcessCluster,
) -> None:
    """Node 2's storage has inodes for one more file only: the second new disk
    fails for real, and the first one goes again."""
    storage = cl.node(2).paths.file_storage_dir
    with tmpfs(storage, "64m", nr_inodes=4):  # the root, the instance's directory, 2 files
        await created(cl)
        before = state(cl)
        job = await cl.run(add_disks(2))
        assert job.status == ERROR
        assert job.error.startswith(f"Could not create a disk for instance {INST} on node {NODE2}:")
        assert "No space left on device" in job.error
        assert state(cl) == before


async def test_modify_warns_of_a_new_disk_its_node_could_not_take_back(
    cl: InProcessCluster,
) -> None:
    """Node 2 goes down at the second new disk: the first cannot be removed
    either.  The job fails and says so, the configuration is unchanged, the
    disk left on node 2 is an orphan (as Ganeti leaves it)."""
    await created(cl)
    serial = cl.cfg.serial
    cl.node(2).go_down_at(blockdev_create, nth=2)
    job = await cl.run(add_disks(2))
    assert job.status == ERROR
    assert job.error == f"Could not create a disk for instance {INST} on node {NODE2}: {REFUSED}"
    warning = f" - WARNING: Failed to remove newly-created disk disk/1 on node {NODE2}: {REFUSED}"
    assert warning in job.log
    inst = cl.instance(INST)
    assert cl.cfg.serial == serial and inst is not None and len(inst.disks) == 1
    assert len(cl.disk_files(2)) == 2


# Failover
def failover(**fields: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": INST, "target_node": NODE1, **fields}


async def test_failover_stops_on_the_source_and_starts_on_the_target(
    cl: InProcessCluster,
) -> None:
    await created(cl, disk_template="diskless", disks=[])
    before = state(cl)
    dry = await cl.run(failover(dry_run=True))
    assert dry.status == SUCCESS, dry.error
    assert state(cl) == before
    job = await cl.run(failover())
    assert job.status == SUCCESS, job.error
    inst = cl.instance(INST)
    assert inst is not None and inst.primary_node == cl.config_node(1).uuid
    assert cl.running(1) == [INST] and cl.running(2) == []
    assert intents.pending(cl.durable) == []


async def test_failover_from_an_unreachable_source_needs_ignore_consistency(
    cl: InProcessCluster,
) -> None:
    await created(cl, disk_template="diskless", disks=[])
    cl.node(2).reachable = False
    before = state(cl)
    job = await cl.run(failover())
    assert job.status == ERROR
    assert job.error == f"Could not shutdown instance {INST} on node {NODE2}: {REFUSED}"
    # The failover's record is kept: the instance is to run on node 2 still,
    # which cannot be checked while node 2 does not answer.
    [(_, record)] = intents.pending(cl.durable)
    assert record.kind == intents.FAILOVER and record.phase == intents.STOPPING
    assert state(cl) == {**before, "records": [(_, record)]}
    job = await cl.run(failover(ignore_consistency=True))
    assert job.status == SUCCESS, job.error
    inst = cl.instance(INST)
    assert inst is not None and inst.primary_node == cl.config_node(1).uuid
    assert cl.running(1) == [INST]
    assert any("proceeding anyway" in line for line in job.log)
    # The first failover's record is settled in the background: node 1 runs it.
    await wait_until_async(lambda: not intents.pending(cl.durable), timeout=20, what="settlement")


async def test_a_failover_whose_target_went_down_is_finished_by_a_startup(
    cl: InProcessCluster,
) -> None:
    """Node 1 goes down when asked to start the instance: as Ganeti, the
    instance belongs to node 1 now; once node 1 answers, a startup runs it."""
    await created(cl, disk_template="diskless", disks=[])
    cl.node(1).go_down_at(instance_start)
    job = await cl.run(failover())
    assert job.status == ERROR
    down = f"Cannot connect to {node_address(1)}: Connection refused"
    assert job.error == f"Could not start instance {INST} on node {NODE1}: {down}"
    inst = cl.instance(INST)
    assert inst is not None and inst.primary_node == cl.config_node(1).uuid
    assert cl.running(1) == cl.running(2) == [] and intents.pending(cl.durable) == []
    cl.node(1).reachable = True
    job = await cl.run({"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": INST})
    assert job.status == SUCCESS, job.error
    assert cl.running(1) == [INST]


async def test_failover_whose_target_cannot_start_it_leaves_it_to_the_target(
    cl: InProcessCluster,
) -> None:
    """As Ganeti: once stopped on the source, the instance belongs to the
    target, even when the target fails to start it."""
    await created(cl, disk_template="diskless", disks=[])
    stale = cl.node(1).paths.run_dir / "fake-hypervisor" / INST
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text((cl.node(2).paths.run_dir / "fake-hypervisor" / INST).read_text())
    job = await cl.run(failover())
    assert job.status == ERROR
    assert job.error == (
        f"Could not start instance {INST} on node {NODE1}: Instance '{INST}' is already running"
    )
    inst = cl.instance(INST)
    assert inst is not None and inst.primary_node == cl.config_node(1).uuid
    assert cl.running(2) == [] and intents.pending(cl.durable) == []
