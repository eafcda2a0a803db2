"""Instance communication (Ganeti 3.0.2's), against an in-process cluster of
two nodes in two groups: the cluster's communication network created and
connected to every group when it is set (and to groups added later), the
extra NIC of ``gnt-instance add/modify -c``, the messages, warnings and
refusals of Ganeti."""

from __future__ import annotations

from collections.abc import AsyncIterator
from ipaddress import ip_address, ip_network
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import errors, testbed
from corral.cmdlib import instance_utils as U
from corral.node.hypervisor.fake import FakeHypervisor
from corral.node.hypervisor.spec import InstanceSpec
from corral.objects import Instance, Network, NodeGroup
from tests.helpers.inprocess import InProcessCluster, JobOutcome, in_process_cluster
from tests.helpers.osdef import make_os

SUCCESS, ERROR = C.JOB_STATUS_SUCCESS, C.JOB_STATUS_ERROR
NODE1, NODE2 = testbed.node_name(1), testbed.node_name(2)
INST = "inst1.example.com"
COMM_NIC = f"ganeti:communication:{INST}"
ROUTED = {"mode": "routed", "link": "communication_rt", "vlan": ""}


@pytest.fixture
async def cl(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    """node1 in "default", node2 in "rack2"."""
    async with in_process_cluster(tmp_path, nodes=2) as cluster:
        assign = {"OP_ID": "OP_GROUP_ASSIGN_NODES", "group_name": "rack2", "nodes": [NODE2]}
        await ok(cluster, {"OP_ID": "OP_GROUP_ADD", "group_name": "rack2"}, assign)
        yield cluster


def set_network(name: str) -> dict[str, Any]:
    return {"OP_ID": "OP_CLUSTER_SET_PARAMS", "instance_communication_network": name}


def create(
    name: str = INST, nics: list[dict[str, Any]] | None = None, comm: bool = True, **fields: Any
) -> Any:
    """A diskless instance without OS on node 1, not started, communicating."""
    return {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "mode": "create",
            "disk_template": "diskless", "disks": [], "no_install": True, "pnode": NODE1,
            "name_check": False, "ip_check": False, "start": False,
            "nics": [{"mode": "bridged", "link": "br0"}] if nics is None else nics,
            "instance_communication": comm, **fields}  # fmt: skip


def communicate(enable: Any, name: str = INST) -> dict[str, Any]:
    return {"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": name,
            "instance_communication": enable}  # fmt: skip


async def ok(cl: InProcessCluster, *ops: dict[str, Any]) -> JobOutcome:
    job = await cl.run(*ops)
    assert job.status == SUCCESS, job.error
    return job


async def followed(cl: InProcessCluster, *ops: dict[str, Any]) -> JobOutcome:
    """Run ``ops``; wait for the one job their last result submits."""
    job = await ok(cl, *ops)
    [[submitted, job_id]] = job.result["jobs"]
    assert submitted is True
    await ok_id(cl, job_id)
    return job


async def ok_id(cl: InProcessCluster, job_id: int) -> None:
    job = await cl.wait(job_id)
    assert job.status == SUCCESS, job.error


async def refused(cl: InProcessCluster, op: dict[str, Any], error: str, ecode: str) -> None:
    """``op`` fails with ``error`` and changes nothing (the configuration's serial)."""
    serial = cl.cfg.serial
    job = await cl.run(op)
    assert (job.status, job.error, job.result[1][1]) == (ERROR, error, ecode)
    assert cl.cfg.serial == serial


def connections(cl: InProcessCluster, name: str) -> dict[str, Any]:
    network = cl.cfg.lookup(Network, name)
    return {g.name: g.networks.get(network.uuid) for g in cl.cfg.groups()}


# The cluster's network
async def test_setting_the_network_creates_it_and_connects_every_group(
    cl: InProcessCluster,
) -> None:
    job = await followed(cl, set_network("mynetwork"))
    assert job.log == [
        "Changing instance communication network to 'mynetwork', only new instances will be"
        " affected."
    ]
    network = cl.cfg.lookup(Network, "mynetwork")
    assert (network.network, network.gateway, network.network6, network.gateway6) == (
        "169.254.0.0/16", None, "fe80::/10", None)  # fmt: skip
    assert network.mac_prefix == "52:54:00"
    assert connections(cl, "mynetwork") == {"default": ROUTED, "rack2": ROUTED}
    info = await ok(cl, {"OP_ID": "OP_CLUSTER_QUERY"})
    assert info.result["instance_communication_network"] == "mynetwork"
    # The same again: nothing to do, no job.
    again = await ok(cl, set_network("mynetwork"))
    assert again.result is None
    assert again.log == ["Instance communication network already is 'mynetwork', nothing to do."]
    # A group added later is connected too.
    await followed(cl, {"OP_ID": "OP_GROUP_ADD", "group_name": "rack3"})
    assert connections(cl, "mynetwork")["rack3"] == ROUTED


async def test_disabling_and_changing_keep_the_old_network(cl: InProcessCluster) -> None:
    await followed(cl, set_network("mynetwork"))
    job = await ok(cl, set_network(""))
    assert (job.result, job.log) == (None, [
        "Previous instance communication network 'mynetwork' should be removed manually.",
        "Disabling instance communication network, only new instances will be affected.",
    ])  # fmt: skip
    assert cl.cfg.cluster.instance_communication_network == ""
    assert cl.cfg.find(Network, "mynetwork") is not None
    # Without a communication network, a new group is connected to nothing.
    group = await ok(cl, {"OP_ID": "OP_GROUP_ADD", "group_name": "rack3"})
    assert group.result is None
    rack3 = cl.cfg.lookup(NodeGroup, "rack3")
    assert rack3.networks == {}


async def test_an_existing_network_is_used_with_ganetis_warnings(cl: InProcessCluster) -> None:
    await ok(cl, {"OP_ID": "OP_NETWORK_ADD", "network_name": "own", "network": "10.30.0.0/24",
                  "gateway": "10.30.0.1"})  # fmt: skip
    job = await followed(cl, set_network("own"))
    risk = "this might pose a security risk"
    assert job.log[:4] == [
        f" - WARNING: Supplied instance communication network 'own' has an IPv4 gateway"
        f" '10.30.0.1', {risk} (default is 'None').",
        f" - WARNING: Supplied instance communication network 'own' has a non-standard IPv4"
        f" network address '10.30.0.0/24', {risk} (default is '169.254.0.0/16').",
        f" - WARNING: Supplied instance communication network 'own' has a non-standard IPv6"
        f" network address 'None', {risk} (default is 'fe80::/10').",
        f" - WARNING: Supplied instance communication network 'own' has a non-standard MAC"
        f" prefix 'None', {risk} (default is '52:54:00').",
    ]
    assert [n.name for n in cl.cfg.networks()] == ["own"]
    assert connections(cl, "own") == {"default": ROUTED, "rack2": ROUTED}


@pytest.mark.parametrize("value", [5, ["mynetwork"], True])
async def test_a_network_name_of_the_wrong_type_is_refused(
    cl: InProcessCluster, value: Any
) -> None:
    serial = cl.cfg.serial
    with pytest.raises(errors.OpPrereqError) as refusal:
        await cl.run(set_network(value))
    assert refusal.value.args == (
        "Invalid OP_CLUSTER_SET_PARAMS: parameter 'instance_communication_network':"
        f" Input should be a valid string (got {value!r})",
        C.ECODE_INVAL,
    )
    assert cl.cfg.serial == serial and cl.cfg.networks() == []


# The instances' NIC
async def test_a_new_instance_gets_the_nic_on_the_network(cl: InProcessCluster) -> None:
    await followed(cl, set_network("mynetwork"))
    await ok(cl, create())
    plain, comm = cl.instance(INST).nics  # type: ignore[union-attr]
    network = cl.cfg.lookup(Network, "mynetwork")
    assert plain.name is None and plain.network is None
    assert (comm.name, comm.network, comm.nicparams) == (COMM_NIC, network.uuid, ROUTED)
    assert comm.ip is not None and ip_address(comm.ip) in ip_network("169.254.0.0/16")
    assert comm.mac.startswith("52:54:00:")
    # A NIC the user named so already is the communication NIC: no second one.
    await ok(cl, create("inst2.example.com",
                        [{"name": "ganeti:communication:inst2.example.com", "network": "mynetwork",
                          "ip": "pool"}]))  # fmt: skip
    assert len(cl.instance("inst2.example.com").nics) == 1  # type: ignore[union-attr]


async def test_without_a_network_nothing_is_created(cl: InProcessCluster) -> None:
    await refused(cl, create(), "Network '' not found", C.ECODE_NOENT)
    assert cl.instance(INST) is None


async def test_modify_adds_and_removes_the_nic(cl: InProcessCluster) -> None:
    await followed(cl, set_network("mynetwork"))
    await ok(cl, create(instance_communication=False))
    assert [n.name for n in cl.instance(INST).nics] == [None]  # type: ignore[union-attr]
    await ok(cl, communicate(True))
    nics = cl.instance(INST).nics  # type: ignore[union-attr]
    assert [n.name for n in nics] == [None, COMM_NIC]
    address = nics[1].ip
    # Asked again: nothing changes (the NIC keeps its address).
    again = await ok(cl, communicate(True))
    assert again.result == []
    assert cl.instance(INST).nics == nics  # type: ignore[union-attr]
    await ok(cl, communicate(False))
    assert [n.name for n in cl.instance(INST).nics] == [None]  # type: ignore[union-attr]
    # Its address went back to the pool: the next instance takes it.
    await ok(cl, create("inst2.example.com"))
    assert cl.instance("inst2.example.com").nics[1].ip == address  # type: ignore[union-attr]


async def test_modify_without_a_network_changes_nothing(cl: InProcessCluster) -> None:
    await ok(cl, create(instance_communication=False))
    await refused(cl, communicate(True), "Network '' not found", C.ECODE_NOENT)
    # Removing what is not there is no change either, but no error.
    await ok(cl, communicate(False))


@pytest.mark.parametrize("value", ["maybe", 2, [True]])
async def test_a_flag_of_the_wrong_type_is_refused(cl: InProcessCluster, value: Any) -> None:
    await followed(cl, set_network("mynetwork"))
    await ok(cl, create("inst2.example.com", instance_communication=False))
    serial = cl.cfg.serial
    for op in (create(instance_communication=value), communicate(value, "inst2.example.com")):
        with pytest.raises(errors.OpPrereqError) as refusal:
            await cl.run(op)
        message, ecode = refusal.value.args
        assert "parameter 'instance_communication': Input should be a valid boolean" in message
        assert ecode == C.ECODE_INVAL
    assert cl.cfg.serial == serial and cl.instance(INST) is None


async def test_start_descriptor_carries_public_and_private_os_parameters(
    cl: InProcessCluster,
) -> None:
    """What a start sends the node for its metad: with a communication NIC, the
    OS with its public and private parameters (the private ones handed to the
    job's scrubbing); without one, no OS parameters at all."""
    await followed(cl, set_network("commnet"))
    await ok(cl, create())
    await ok(cl, create("plain.example.com", comm=False))
    hidden: list[str] = []
    for name in (INST, "plain.example.com"):
        inst = cl.cfg.lookup(Instance, name).copy_for_update()
        assert isinstance(inst, Instance)
        inst.os = "tiny+default"
        inst.osparams = {"release": "bookworm"}
        inst.osparams_private = {"token": "private-value"}
        desc = U.start_descriptor(cl.cfg, inst, hidden.extend)
        if name == INST:
            assert desc["osspec"] == {
                "name": "tiny+default",
                "params": {
                    "release": {"value": "bookworm", "visibility": "public"},
                    "token": {"value": "private-value", "visibility": "private"},
                },
            }
        else:
            assert "osspec" not in desc
    assert hidden == ["private-value"]


async def test_starts_and_migration_targets_get_the_os_parameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The descriptors the nodes receive (a spy on the fake hypervisor): the
    start of ``add`` and a migration's target carry the public and private
    parameters, never the secret one."""
    seen: list[tuple[str, Any]] = []

    async def start(self: FakeHypervisor, spec: InstanceSpec, paused: bool = False) -> None:
        seen.append(("start", spec.wire.get("osspec")))
        await real_start(self, spec, paused)

    async def accept(self: FakeHypervisor, spec: InstanceSpec, info: Any, target: str) -> None:
        seen.append(("accept", spec.wire.get("osspec")))
        await real_accept(self, spec, info, target)

    real_start, real_accept = FakeHypervisor.start, FakeHypervisor.accept_instance
    monkeypatch.setattr(FakeHypervisor, "start", start)
    monkeypatch.setattr(FakeHypervisor, "accept_instance", accept)
    async with in_process_cluster(tmp_path, nodes=2) as cl:
        for index in (1, 2):
            make_os(cl.node(index).paths, "osp", variants=None,
                    parameters={"release": "r", "token": "t", "password": "p"})  # fmt: skip
        await followed(cl, set_network("commnet"))
        add = create(nics=[], os_type="osp", no_install=False, start=True,
                     osparams={"release": "bookworm"}, osparams_private={"token": "pv"},
                     osparams_secret={"password": "sv"})  # fmt: skip
        migrate = {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": INST, "target_node": NODE2}
        await ok(cl, add)
        await ok(cl, migrate)
    expected = {"name": "osp", "params": {
        "release": {"value": "bookworm", "visibility": "public"},
        "token": {"value": "pv", "visibility": "private"}}}  # fmt: skip
    assert seen == [("start", expected), ("accept", expected)]
