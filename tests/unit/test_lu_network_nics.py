"""Instances' NICs on networks, against an in-process cluster of two nodes in
two groups: ``network=`` and ``ip=pool`` at creation and in changes, the
address freed when a NIC or its instance goes, the checks and messages of
Ganeti 3.0.2, the hooks' and OS scripts' variables."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import errors, testbed
from corral.exports.config_ini import ExportNic
from corral.objects import Instance, Network
from tests.helpers.inprocess import InProcessCluster, in_process_cluster
from tests.helpers.osdef import make_os

SUCCESS, ERROR = C.JOB_STATUS_SUCCESS, C.JOB_STATUS_ERROR
NODE1, NODE2 = testbed.node_name(1), testbed.node_name(2)
INST = "inst1.example.com"
SUBNET = "10.20.0.0/29"  # 8 addresses: 6 free once its own are reserved


@pytest.fixture
async def cl(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    """node1 in "default", connected to net1 (bridged on br-net1); node2 in rack2."""
    async with in_process_cluster(tmp_path, nodes=2) as cluster:
        job = await cluster.run(
            {"OP_ID": "OP_NETWORK_ADD", "network_name": "net1", "network": SUBNET,
             "gateway": "10.20.0.1", "mac_prefix": "aa:bb:cc", "tags": ["t1"]},
            {"OP_ID": "OP_NETWORK_CONNECT", "network_name": "net1", "group_name": "default",
             "network_mode": "bridged", "network_link": "br-net1", "network_vlan": ""},
            {"OP_ID": "OP_GROUP_ADD", "group_name": "rack2"},
            {"OP_ID": "OP_GROUP_ASSIGN_NODES", "group_name": "rack2", "nodes": [NODE2]},
        )  # fmt: skip
        assert job.status == SUCCESS, job.error
        yield cluster


def create(name: str = INST, nics: list[dict[str, Any]] | None = None, **fields: Any) -> Any:
    """A diskless instance without OS on node 1, not started."""
    return {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "mode": "create",
            "disk_template": "diskless", "disks": [], "no_install": True, "pnode": NODE1,
            "name_check": False, "ip_check": False, "start": False,
            "nics": [{"network": "net1", "ip": "pool"}] if nics is None else nics,
            **fields}  # fmt: skip


def modify(nics: list[Any], name: str = INST, **fields: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": name, "nics": nics, **fields}


async def ok(cl: InProcessCluster, *ops: dict[str, Any]) -> list[str]:
    job = await cl.run(*ops)
    assert job.status == SUCCESS, job.error
    return job.log


async def refused(cl: InProcessCluster, op: dict[str, Any], error: str, ecode: str) -> None:
    """``op`` fails with ``error`` and changes nothing (the configuration's serial)."""
    serial = cl.cfg.serial
    job = await cl.run(op)
    assert (job.status, job.error, job.result[1][1]) == (ERROR, error, ecode)
    assert cl.cfg.serial == serial


def instance(cl: InProcessCluster, name: str = INST) -> Instance:
    inst = cl.instance(name)
    assert inst is not None
    return inst


async def pool(cl: InProcessCluster) -> list[Any]:
    result = await cl.master.query(
        C.QR_NETWORK, ["map", "free_count", "inst_list"], ["=", "name", "net1"]
    )
    return [value for _, value in result["data"][0]]


# Creating
async def test_ip_from_the_pool_and_parameters_from_the_group(cl: InProcessCluster) -> None:
    log = await ok(cl, create(nics=[{"network": "net1", "ip": "pool"}, {"ip": "10.99.0.1"}]))
    assert log[:2] == [
        " - INFO: NIC/0 inherits netparams ['bridged', 'br-net1', '']",
        " - INFO: Chose IP 10.20.0.2 from network net1",
    ]
    nic, plain = instance(cl).nics
    network = cl.cfg.lookup(Network, "net1")
    assert (nic.network, nic.ip, nic.nicparams) == (
        network.uuid,
        "10.20.0.2",
        {"mode": "bridged", "link": "br-net1", "vlan": ""},
    )
    assert nic.mac.startswith("aa:bb:cc:") and not plain.mac.startswith("aa:bb:cc:")
    assert plain.network is None
    assert await pool(cl) == ["XXX....X", 4, [INST]]
    # The next instance takes the next address; an address given is taken if free.
    await ok(cl, create("inst2.example.com"),
             create("inst3.example.com", [{"network": "net1", "ip": "10.20.0.6"}]))  # fmt: skip
    assert instance(cl, "inst2.example.com").nics[0].ip == "10.20.0.3"
    assert await pool(cl) == ["XXXX..XX", 2, [*sorted(
        [INST, "inst2.example.com", "inst3.example.com"],
        key=lambda name: instance(cl, name).uuid)]]  # fmt: skip


async def test_the_address_goes_back_to_the_pool_with_its_instance(cl: InProcessCluster) -> None:
    await ok(cl, create())
    await ok(cl, {"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": INST})
    assert await pool(cl) == ["XX.....X", 5, []]
    await ok(cl, create("inst2.example.com"))
    assert instance(cl, "inst2.example.com").nics[0].ip == "10.20.0.2"


@pytest.mark.parametrize(
    ("nics", "fields", "error", "ecode"),
    [
        ([{"network": "net1", "ip": "10.20.0.1"}], {},
         "IP address 10.20.0.1 already in use or does not belong to network net1",
         C.ECODE_NOTUNIQUE),
        ([{"network": "net1", "ip": "10.30.0.1"}], {},
         "IP address 10.30.0.1 already in use or does not belong to network net1",
         C.ECODE_NOTUNIQUE),
        ([{"network": "net1", "mode": "routed"}], {},
         "If network is given, no mode or link is allowed to be passed", C.ECODE_INVAL),
        ([{"ip": "pool"}], {}, "if ip=pool, parameter network must be passed too",
         C.ECODE_INVAL),
        ([{"mode": "routed"}], {},
         "Routed nic mode requires an ip address if not attached to a network", C.ECODE_INVAL),
        ([{"network": "nosuch"}], {}, "Network 'nosuch' not found", C.ECODE_NOENT),
        ([{"network": "net1"}], {"pnode": NODE2},
         "No netparams found for network net1. Probably not connected to node's"
         f" {NODE2} nodegroup", C.ECODE_INVAL),
        ([{"ip": "10.20.0.4"}], {},
         "The requested IP address (10.20.0.4) belongs to network net1, but the target NIC"
         " does not.", C.ECODE_STATE),
        ([{"network": "net1", "ip": "pool"}] * 6, {},
         "Unable to get a free IP for NIC 5 from the address pool", C.ECODE_STATE),
        ([{"network": "net1", "ip": "10.20.0.3"}] * 2, {},
         "IP address 10.20.0.3 already in use or does not belong to network net1",
         C.ECODE_NOTUNIQUE),
    ],
)  # fmt: skip
async def test_create_refuses(
    cl: InProcessCluster, nics: list[Any], fields: dict[str, Any], error: str, ecode: str
) -> None:
    await refused(cl, create(nics=nics, **fields), error, ecode)
    assert cl.cfg.reservations.values("ip", cl.cfg.lookup(Network, "net1").uuid) == set()


async def test_without_conflicts_check(cl: InProcessCluster) -> None:
    """An externally reserved address may be taken; one of a network by a NIC on none."""
    await ok(cl, create(nics=[{"network": "net1", "ip": "10.20.0.1"}, {"ip": "10.20.0.4"}],
                        conflicts_check=False))  # fmt: skip
    assert [n.ip for n in instance(cl).nics] == ["10.20.0.1", "10.20.0.4"]
    assert (await pool(cl))[:2] == ["XX.....X", 5]


async def test_no_mode_given_takes_the_network_even_on_a_routed_cluster(
    cl: InProcessCluster,
) -> None:
    await ok(cl, {"OP_ID": "OP_CLUSTER_SET_PARAMS", "nicparams": {"mode": "routed", "link": "rt"}})
    await ok(cl, create(nics=[{"network": "net1"}]))
    assert instance(cl).nics[0].nicparams["mode"] == "bridged"


async def test_allocator_places_on_a_group_connected_to_the_network(
    cl: InProcessCluster,
) -> None:
    """Only rack2 (node2) is connected: chosen though node1 wins ties."""
    await ok(cl,
             {"OP_ID": "OP_NETWORK_DISCONNECT", "network_name": "net1", "group_name": "default"},
             {"OP_ID": "OP_NETWORK_CONNECT", "network_name": "net1", "group_name": "rack2",
              "network_mode": "routed", "network_link": "rt2"},
             {"OP_ID": "OP_NETWORK_ADD", "network_name": "net2",
              "network": "10.40.0.0/24"})  # fmt: skip
    op = create(iallocator="hail")
    del op["pnode"]
    await ok(cl, op)
    assert instance(cl).primary_node == cl.config_node(2).uuid
    assert instance(cl).nics[0].nicparams == {"mode": "routed", "link": "rt2", "vlan": ""}
    job = await cl.run({**op, "instance_name": "inst2.example.com", "nics": [{"network": "net2"}]})
    assert job.status == ERROR
    assert "group rack2 is not connected to a network required by instance" in job.error


# Changing
async def test_modify_adds_moves_and_removes_nics(cl: InProcessCluster) -> None:
    await ok(cl, create(nics=[]))
    job = await cl.run(modify([["add", -1, {"network": "net1", "ip": "pool"}]]))
    assert job.status == SUCCESS, job.error
    nic = instance(cl).nics[0]
    assert job.result == [
        ["nic.0", f"add:mac={nic.mac},ip=10.20.0.2,mode=bridged,link=br-net1,network=net1"]
    ]
    assert job.log == [" - INFO: Chose IP 10.20.0.2 from network net1"]
    job = await cl.run(modify([["modify", 0, {"ip": "10.20.0.5"}]]))
    assert (job.status, job.log) == (SUCCESS, [" - INFO: Reserving IP 10.20.0.5 in network net1"])
    assert job.result == [["nic.ip/0", "10.20.0.5"]]
    assert await pool(cl) == ["XX...X.X", 4, [INST]]
    job = await cl.run(modify([["modify", 0, {"network": "none", "ip": "none"}]]))
    assert job.status == SUCCESS, job.error
    moved = instance(cl).nics[0]
    assert (moved.network, moved.ip) == (None, None)
    # Off the network, the MAC follows the cluster's prefix again.
    assert not moved.mac.startswith("aa:bb:cc:")
    assert job.result == [["nic.ip/0", None], ["nic.network/0", None]]
    assert await pool(cl) == ["XX.....X", 5, []]
    await ok(cl, modify([["modify", 0, {"network": "net1", "ip": "pool"}]]))
    assert instance(cl).nics[0].ip == "10.20.0.2"
    await ok(cl, modify([["remove", 0, {}]]))
    assert await pool(cl) == ["XX.....X", 5, []]


@pytest.mark.parametrize(
    ("mod", "error", "ecode"),
    [
        (["modify", 0, {"ip": "10.20.0.3"}], "IP 10.20.0.3 not available in network net1",
         C.ECODE_NOTUNIQUE),
        (["modify", 0, {"link": "br9"}],
         "Not allowed to change link or mode of a NIC that is connected to a network",
         C.ECODE_INVAL),
        (["modify", 0, {"network": "net1", "mode": "routed"}],
         "If network is given mode or link should not", C.ECODE_INVAL),
        (["modify", 0, {"network": "none"}],
         "The requested IP address (10.20.0.2) belongs to network net1, but the target NIC"
         " does not.", C.ECODE_STATE),
        (["modify", 0, {"mac": "auto"}],
         "'auto' is not a valid MAC address when modifying an existing NIC", C.ECODE_INVAL),
        (["add", -1, {"ip": "pool"}], "If ip=pool, parameter network cannot be none",
         C.ECODE_INVAL),
        (["modify", 1, {"ip": "pool"}], "ip=pool, but no network found", C.ECODE_INVAL),
        (["modify", 1, {"ip": "none"}],
         "Cannot set the NIC IP address to None on a routed NIC if not attached to a network",
         C.ECODE_INVAL),
    ],
)  # fmt: skip
async def test_modify_refuses(cl: InProcessCluster, mod: list[Any], error: str, ecode: str) -> None:
    await ok(cl, create(nics=[{"network": "net1", "ip": "pool"},
                              {"mode": "routed", "link": "rt", "ip": "10.99.0.1"}]),
             create("inst2.example.com"))  # fmt: skip
    await refused(cl, modify([mod]), error, ecode)


async def test_disconnect_refuses_while_nics_are_on_the_network(cl: InProcessCluster) -> None:
    await ok(cl, create())
    op = {"OP_ID": "OP_NETWORK_DISCONNECT", "network_name": "net1", "group_name": "default"}
    job = await cl.run(op)
    assert job.error == (
        "Conflicting IP addresses found;  remove/modify the corresponding network interfaces"
    )
    assert job.log == [
        " - WARNING: IP addresses from network 'net1', which is about to disconnect from node"
        f" group 'default', are in use: {INST}: nic0/10.20.0.2"
    ]


async def test_two_jobs_never_take_one_address(cl: InProcessCluster) -> None:
    """Jobs on both nodes run at once (each holds its own node's locks)."""
    await ok(cl, {"OP_ID": "OP_NETWORK_CONNECT", "network_name": "net1", "group_name": "rack2",
                  "network_mode": "bridged", "network_link": "br-net1"})  # fmt: skip
    ops = [create(f"inst{i}.example.com", pnode=(NODE1, NODE2)[i % 2]) for i in range(1, 5)]
    ids = [await cl.queue.submit([op]) for op in ops]
    jobs = [await cl.wait(job_id) for job_id in ids]
    assert all(job.status == SUCCESS for job in jobs), [job.error for job in jobs]
    ips = sorted(instance(cl, f"inst{i}.example.com").nics[0].ip or "" for i in range(1, 5))
    assert ips == ["10.20.0.2", "10.20.0.3", "10.20.0.4", "10.20.0.5"]


# What hooks and OS scripts see
async def test_hooks_and_os_scripts_see_the_network(cl: InProcessCluster, tmp_path: Path) -> None:
    hooks = cl.node(1).paths.hooks_dir / "instance-add-pre.d"
    hooks.mkdir(parents=True)
    (hooks / "dump").write_text(f"#!/bin/sh\nenv > {tmp_path}/hook-env\n")
    (hooks / "dump").chmod(0o755)
    make_os(cl.node(1).paths, "envdump", variants=None,
            scripts={"create": f"#!/bin/sh\nenv > {tmp_path}/os-env\n"})  # fmt: skip
    await ok(cl, create(os_type="envdump", no_install=False, disk_template="file",
                        disks=[{"size": 4}]))  # fmt: skip
    network = cl.cfg.lookup(Network, "net1")
    hook = _env(tmp_path / "hook-env")
    assert {k: v for k, v in hook.items() if k.startswith("GANETI_INSTANCE_NIC0_NETWORK")} == {
        "GANETI_INSTANCE_NIC0_NETWORK_NAME": "net1",
        "GANETI_INSTANCE_NIC0_NETWORK_UUID": network.uuid,
        "GANETI_INSTANCE_NIC0_NETWORK_TAGS": "t1",
        "GANETI_INSTANCE_NIC0_NETWORK_SUBNET": SUBNET,
        "GANETI_INSTANCE_NIC0_NETWORK_GATEWAY": "10.20.0.1",
        "GANETI_INSTANCE_NIC0_NETWORK_MAC_PREFIX": "aa:bb:cc",
    }
    assert hook["GANETI_INSTANCE_NIC0_BRIDGE"] == "br-net1"
    os_env = _env(tmp_path / "os-env")
    assert {k: v for k, v in os_env.items() if k.startswith("NIC_0_")} == {
        "NIC_0_MAC": instance(cl).nics[0].mac, "NIC_0_UUID": instance(cl).nics[0].uuid,
        "NIC_0_MODE": "bridged", "NIC_0_BRIDGE": "br-net1", "NIC_0_LINK": "br-net1",
        "NIC_0_IP": "10.20.0.2", "NIC_0_NETWORK_NAME": "net1",
        "NIC_0_NETWORK_UUID": network.uuid, "NIC_0_NETWORK_TAGS": "t1",
        "NIC_0_NETWORK_SUBNET": SUBNET, "NIC_0_NETWORK_GATEWAY": "10.20.0.1",
        "NIC_0_NETWORK_MAC_PREFIX": "aa:bb:cc",
    }  # fmt: skip


def _env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


async def test_instance_fields_name_the_network(cl: InProcessCluster) -> None:
    await ok(cl, create(nics=[{"network": "net1"}, {}]))
    uuid = cl.cfg.lookup(Network, "net1").uuid
    fields = ["nic.networks", "nic.networks.names", "nic.network/0", "nic.network.name/0",
              "nic.network.name/1", "nic.ips"]  # fmt: skip
    result = await cl.master.query(C.QR_INSTANCE, fields, None)
    assert result["data"] == [
        [[C.RS_NORMAL, [uuid, None]], [C.RS_NORMAL, ["net1", None]], [C.RS_NORMAL, uuid],
         [C.RS_NORMAL, "net1"], [C.RS_UNAVAIL, None], [C.RS_NORMAL, [None, None]]]
    ]  # fmt: skip
    with pytest.raises(errors.OpPrereqError):
        await cl.master.query(C.QR_NETWORK, ["name"], ["=", "name", "nosuch"])


async def test_an_exported_nic_comes_back_on_its_network(cl: InProcessCluster) -> None:
    """An import gives the export's NIC (its network by uuid, its MAC and IP)."""
    uuid = cl.cfg.lookup(Network, "net1").uuid
    nic = ExportNic(mac="aa:bb:cc:00:00:01", ip="10.20.0.4", name="eth0", network=uuid)
    await ok(cl, create(nics=[nic.spec()]))
    (made,) = instance(cl).nics
    assert (made.network, made.ip, made.mac, made.name) == (
        uuid,
        "10.20.0.4",
        "aa:bb:cc:00:00:01",
        "eth0",
    )
    assert made.nicparams == {"mode": "bridged", "link": "br-net1", "vlan": ""}
