"""Network logical units against an in-process cluster (tests/helpers/inprocess.py):
add, change and remove networks, and what queries show of them; bad input
gets Ganeti's error and changes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import errors, testbed
from corral.config.manager import ConfigManager
from corral.objects import Network, NodeGroup
from corral.state.ports import Conflict
from corral.state.sqlite.config import SqliteConfigStore
from tests.helpers.inprocess import InProcessCluster, in_process_cluster, node_address

SUCCESS, ERROR = C.JOB_STATUS_SUCCESS, C.JOB_STATUS_ERROR
# The in-process nodes' addresses are 127.0.99.<n>: a network over them.
NODES_SUBNET = "127.0.99.0/24"
SUBNET = "10.20.0.0/28"


@pytest.fixture
async def cl(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    async with in_process_cluster(tmp_path, nodes=2) as cluster:
        yield cluster


def add(name: str = "net1", network: str = SUBNET, **fields: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_NETWORK_ADD", "network_name": name, "network": network, **fields}


def modify(name: str = "net1", **fields: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_NETWORK_SET_PARAMS", "network_name": name, **fields}


async def added(cl: InProcessCluster, **fields: Any) -> Network:
    job = await cl.run(add(**fields))
    assert job.status == SUCCESS, job.error
    network = cl.cfg.find(Network, fields.get("name", "net1"))
    assert network is not None
    return network


async def query(cl: InProcessCluster, fields: list[str], qfilter: Any = None) -> list[Any]:
    result = await cl.master.query(C.QR_NETWORK, fields, qfilter)
    return [[value for _, value in row] for row in result["data"]]


# Add
async def test_add_reserves_its_own_addresses_and_keeps_what_it_was_given(
    cl: InProcessCluster,
) -> None:
    network = await added(
        cl,
        gateway="10.20.0.1",
        network6="2001:db8::/64",
        gateway6="2001:db8::1",
        mac_prefix="AA:00:0B",
        add_reserved_ips=["10.20.0.9"],
        tags=["blue", "blue", "red"],
    )
    assert network.ext_reservations == ["10.20.0.0", "10.20.0.1", "10.20.0.9", "10.20.0.15"]
    assert (network.mac_prefix, network.tags, network.serial_no) == ("aa:00:0b", ["blue", "red"], 1)
    fields = ["name", "network", "gateway", "network6", "gateway6", "mac_prefix", "free_count",
              "reserved_count", "map", "external_reservations", "group_cnt", "group_list",
              "inst_cnt", "inst_list", "tags"]  # fmt: skip
    rows = await query(cl, fields)
    assert rows == [
        ["net1", SUBNET, "10.20.0.1", "2001:db8::/64", "2001:db8::1", "aa:00:0b", 12, 4,
         "XX.......X.....X", "10.20.0.0, 10.20.0.1, 10.20.0.9, 10.20.0.15", 0, [], 0, [],
         ["blue", "red"]],
    ]  # fmt: skip


async def test_add_reserves_the_nodes_and_the_master_address(cl: InProcessCluster) -> None:
    job = await cl.run(add(network=NODES_SUBNET))
    assert job.status == SUCCESS, job.error
    network = cl.cfg.find(Network, "net1")
    assert network is not None
    assert network.ext_reservations == [
        "127.0.99.0",
        node_address(1),
        node_address(2),
        "127.0.99.255",
    ]
    reserved = f" - INFO: Reserved IP address of node 'node2.example.com' ({node_address(2)})"
    assert reserved in job.log
    # As Ganeti: a node's secondary address is its primary one, and the master's too.
    assert (
        f" - WARNING: Cannot reserve cluster master IP address ({node_address(1)}):"
        f" IP {node_address(1)} is already externally reserved"
    ) in job.log


async def test_add_without_conflicts_check_leaves_the_nodes_addresses_free(
    cl: InProcessCluster,
) -> None:
    await added(cl, network=NODES_SUBNET, conflicts_check=False)
    assert await query(cl, ["reserved_count"]) == [[2]]


def _unchanged(cl: InProcessCluster) -> tuple[int, list[str]]:
    return cl.cfg.serial, [n.name for n in cl.cfg.networks()]


@pytest.mark.parametrize(
    ("op", "error"),
    [
        (add(network="10.0.0.0/8"), "Cannot create IP address pool for network 'net1': A big"
         " network with 16777216 host(s) is currently not supported. please specify at most a"
         " /16 network"),
        (add(network="10.0.0.0/31"), "Cannot create IP address pool for network 'net1': A"
         " network with only 2 host(s) is too small, please specify at least a /30 network"),
        (add(gateway="10.9.9.9"), "Cannot create IP address pool for network 'net1':"
         f" {SUBNET} does not contain 10.9.9.9"),
        (add(add_reserved_ips=["10.20.0.15"]), "Cannot reserve IP address '10.20.0.15': IP"
         " 10.20.0.15 is already externally reserved"),
        (add(mac_prefix="aa:bb"), "Invalid MAC address prefix 'aa:bb'"),
        (add(tags=["bad tag"]), "Tag contains invalid characters: 'bad tag' (allowed: letters,"
         " digits and . + * / : @ - _)"),
        (add(network="10.20.0.1/28"), "Invalid OP_NETWORK_ADD: parameter 'network': Value error,"
         " not an IPv4 network: 10.20.0.1/28 has host bits set (got '10.20.0.1/28')"),
        (add(gateway="2001:db8::1"), "Invalid OP_NETWORK_ADD: parameter 'gateway': Value error,"
         " not an IPv4 address: Expected 4 octets in '2001:db8::1' (got '2001:db8::1')"),
    ],
)  # fmt: skip
async def test_bad_input_changes_nothing(cl: InProcessCluster, op: Any, error: str) -> None:
    before = _unchanged(cl)
    if error.startswith("Invalid OP_"):  # refused at submission
        with pytest.raises(errors.OpPrereqError) as err:
            await cl.queue.submit([op])
        assert err.value.message == error
    else:
        job = await cl.run(op)
        assert (job.status, job.error) == (ERROR, error)
    assert _unchanged(cl) == before


async def test_a_name_is_used_once(cl: InProcessCluster) -> None:
    network = await added(cl)
    job = await cl.run(add(network="10.30.0.0/24"))
    assert job.error == (
        f"Desired network name 'net1' already exists as a network (UUID: {network.uuid})"
    )
    assert job.result[1][1] == C.ECODE_EXISTS


# Modify
async def test_modify_changes_reservations_with_warnings_for_what_it_cannot(
    cl: InProcessCluster,
) -> None:
    await added(cl, gateway="10.20.0.1")
    job = await cl.run(
        modify(add_reserved_ips=["10.20.0.5", "10.20.0.15", "10.30.0.1"],
               remove_reserved_ips=["10.20.0.1", "10.20.0.6"], mac_prefix="aa:bb:cc")
    )  # fmt: skip
    assert job.status == SUCCESS, job.error
    assert job.log == [
        " - WARNING: Cannot reserve IP address 10.20.0.15: IP 10.20.0.15 is already externally"
        " reserved",
        f" - WARNING: Cannot reserve IP address 10.30.0.1: {SUBNET} does not contain 10.30.0.1",
        " - WARNING: Cannot unreserve Gateway's IP",
        " - WARNING: Cannot release IP address 10.20.0.6: IP 10.20.0.6 is not externally reserved",
    ]
    assert await query(cl, ["external_reservations", "mac_prefix", "serial_no"]) == [
        ["10.20.0.0, 10.20.0.1, 10.20.0.5, 10.20.0.15", "aa:bb:cc", 2]
    ]
    assert (await cl.run(modify(mac_prefix="none"))).status == SUCCESS
    assert await query(cl, ["mac_prefix"]) == [[None]]


async def test_modify_moves_the_gateway(cl: InProcessCluster) -> None:
    await added(cl, gateway="10.20.0.1")
    job = await cl.run(modify(gateway="10.20.0.14", network6="2001:db8::/64"))
    assert job.status == SUCCESS, job.error
    assert await query(cl, ["gateway", "external_reservations", "network6"]) == [
        ["10.20.0.14", "10.20.0.0, 10.20.0.14, 10.20.0.15", "2001:db8::/64"]
    ]
    job = await cl.run(modify(gateway="10.20.0.14"))
    assert job.log == [" - WARNING: Gateway is already 10.20.0.14"]


@pytest.mark.parametrize(
    ("op", "error", "ecode"),
    [
        (modify(gateway="10.20.0.2", add_reserved_ips=["10.20.0.3"]),
         "Cannot modify gateway and reserved ips at once", C.ECODE_INVAL),
        (modify(gateway="10.20.0.15"),
         "Gateway IP address '10.20.0.15' is already externally reserved", C.ECODE_STATE),
        (modify(gateway="10.99.0.1"), f"{SUBNET} does not contain 10.99.0.1", C.ECODE_INVAL),
        (modify(mac_prefix="xx:yy:zz"), "Invalid MAC address prefix 'xx:yy:zz'", C.ECODE_INVAL),
        (modify("nonet", mac_prefix="aa:bb:cc"), "Network 'nonet' not found", C.ECODE_NOENT),
    ],
)  # fmt: skip
async def test_modify_refuses_bad_changes(
    cl: InProcessCluster, op: Any, error: str, ecode: str
) -> None:
    await added(cl, gateway="10.20.0.1")
    before = _unchanged(cl)
    job = await cl.run(op)
    assert (job.status, job.error, job.result[1][1]) == (ERROR, error, ecode)
    assert _unchanged(cl) == before


# Remove
async def test_remove(cl: InProcessCluster) -> None:
    await added(cl)
    job = await cl.run({"OP_ID": "OP_NETWORK_REMOVE", "network_name": "net1"})
    assert job.status == SUCCESS, job.error
    assert cl.cfg.networks() == []
    job = await cl.run({"OP_ID": "OP_NETWORK_REMOVE", "network_name": "net1"})
    assert (job.error, job.result[1][1]) == ("Network 'net1' not found", C.ECODE_NOENT)


# Queries
async def test_networks_are_listed_in_natural_order_and_asked_for_by_name(
    cl: InProcessCluster,
) -> None:
    for name, subnet in (("net10", "10.10.0.0/24"), ("net9", "10.9.0.0/24"), ("a", SUBNET)):
        await added(cl, name=name, network=subnet)
    assert await query(cl, ["name"]) == [["a"], ["net9"], ["net10"]]
    # Names asked for alone: in the order asked (luxid's).
    assert await query(cl, ["name"], ["|", ["=", "name", "net10"], ["=", "name", "a"]]) == [
        ["net10"],
        ["a"],
    ]
    with pytest.raises(errors.OpPrereqError) as err:
        await query(cl, ["name"], ["=", "name", "nosuch"])
    assert err.value.args == ("Network name nosuch not found", C.ECODE_NOENT)


async def test_tags_of_a_network(cl: InProcessCluster) -> None:
    await added(cl, tags=["a"])
    job = await cl.run(
        {"OP_ID": "OP_TAGS_SET", "kind": "network", "name": "net1", "tags": ["b", "c"]},
        {"OP_ID": "OP_TAGS_DEL", "kind": "network", "name": "net1", "tags": ["a"]},
        {"OP_ID": "OP_TAGS_GET", "kind": "network", "name": "net1"},
        {"OP_ID": "OP_TAGS_SEARCH", "pattern": "^[bc]$"},
    )
    assert job.status == SUCCESS, job.error
    assert job.result == [["/network/net1", "b"], ["/network/net1", "c"]]
    assert await query(cl, ["tags"]) == [[["b", "c"]]]


# Connect and disconnect
def connect(group: str = "default", **fields: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_NETWORK_CONNECT", "network_name": "net1", "group_name": group,
            "network_mode": "bridged", "network_link": "br0", **fields}  # fmt: skip


def disconnect(group: str = "default") -> dict[str, Any]:
    return {"OP_ID": "OP_NETWORK_DISCONNECT", "network_name": "net1", "group_name": group}


async def test_connect_and_disconnect_a_group(cl: InProcessCluster) -> None:
    network = await added(cl)
    routed = connect(network_mode="routed", network_link="rt1", network_vlan="100")
    job = await cl.run({"OP_ID": "OP_GROUP_ADD", "group_name": "rack1"}, connect("rack1"), routed)
    assert job.status == SUCCESS, job.error
    assert cl.cfg.lookup(NodeGroup, "default").networks == {
        network.uuid: {"mode": "routed", "link": "rt1", "vlan": "100"}
    }
    assert await query(cl, ["group_cnt", "group_list", "serial_no"]) == [
        [2, sorted([["default", "routed", "rt1", "100"], ["rack1", "bridged", "br0", ""]],
                   key=lambda g: cl.cfg.lookup(NodeGroup, g[0]).uuid), 1],
    ]  # fmt: skip
    job = await cl.run(connect())
    assert (job.status, job.log) == (
        SUCCESS,
        [" - WARNING: Network 'net1' is already mapped to group 'default'"],
    )
    job = await cl.run({"OP_ID": "OP_NETWORK_REMOVE", "network_name": "net1"})
    assert (job.error, job.result[1][1]) == ("Network still connected", C.ECODE_STATE)
    assert job.log == [
        " - WARNING: Network 'net1' is connected to the following node groups: default, rack1"
    ]
    job = await cl.run(disconnect(), disconnect("rack1"), disconnect("rack1"))
    assert job.status == SUCCESS, job.error
    assert job.log == [" - WARNING: Network 'net1' is not mapped to group 'rack1'"]
    assert await query(cl, ["group_list"]) == [[[]]]
    assert cl.cfg.lookup(NodeGroup, "default").networks == {}


async def test_connect_refuses_a_group_whose_instances_use_its_addresses(
    cl: InProcessCluster,
) -> None:
    await added(cl)
    job = await cl.run(
        create_instance("inst1.example.com", [{"ip": "10.20.0.5"}, {"ip": "10.30.0.5"}]),
        create_instance("inst2.example.com", [{}, {"ip": "10.20.0.6"}]),
    )
    assert job.status == SUCCESS, job.error
    before = _unchanged(cl)
    job = await cl.run(connect())
    assert (job.error, job.result[1][1]) == (
        "Conflicting IP addresses found;  remove/modify the corresponding network interfaces",
        C.ECODE_STATE,
    )
    assert job.log == [
        " - WARNING: IP addresses from network 'net1', which is about to connect to node"
        " group 'default', are in use: inst1.example.com: nic0/10.20.0.5, inst2.example.com:"
        " nic1/10.20.0.6"
    ]
    assert _unchanged(cl) == before
    job = await cl.run(connect(conflicts_check=False))
    assert job.status == SUCCESS, job.error


async def test_unknown_names_are_refused(cl: InProcessCluster) -> None:
    await added(cl)
    job = await cl.run(connect("nosuch"))
    assert (job.error, job.result[1][1]) == ("Node group 'nosuch' not known", C.ECODE_NOENT)
    job = await cl.run({**disconnect(), "network_name": "nosuch"})
    assert (job.error, job.result[1][1]) == ("Network 'nosuch' not found", C.ECODE_NOENT)


def create_instance(name: str, nics: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """A diskless instance without OS on node 1, not started."""
    return {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "mode": "create",
            "disk_template": "diskless", "disks": [], "nics": nics, "no_install": True,
            "pnode": testbed.node_name(1), "name_check": False, "ip_check": False,
            "start": False, **fields}  # fmt: skip


# Hooks
def _hook(cl: InProcessCluster, index: int, hpath: str, out: Path) -> None:
    """A post hook on node ``index`` that writes its environment to ``out/<node>-<hpath>``."""
    directory = cl.node(index).paths.hooks_dir / f"{hpath}-post.d"
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "dump"
    script.write_text(f"#!/bin/sh\nenv > {out}/node{index}-{hpath}\n")
    script.chmod(0o755)


def _network_env(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    wanted = ("GANETI_NETWORK_", "GANETI_GROUP_", "GANETI_OBJECT_TYPE", "GANETI_OP_CODE")
    return {key: value for key, value in pairs if key.startswith(wanted)}


async def test_hooks_of_network_operations(cl: InProcessCluster, tmp_path: Path) -> None:
    paths = ("network-add", "network-modify", "network-connect", "network-disconnect",
             "network-remove")  # fmt: skip
    for hpath in paths:
        for index in (1, 2):
            _hook(cl, index, hpath, tmp_path)
    job = await cl.run(
        {"OP_ID": "OP_GROUP_ADD", "group_name": "rack2"},
        {"OP_ID": "OP_GROUP_ASSIGN_NODES", "group_name": "rack2", "nodes": ["node2.example.com"]},
        add(gateway="10.20.0.1", network6="2001:db8::/64", tags=["b", "a"]),
        modify(mac_prefix="aa:bb:cc"),
        connect("rack2", network_vlan="7"),
        disconnect("rack2"),
        {"OP_ID": "OP_NETWORK_REMOVE", "network_name": "net1"},
    )
    assert job.status == SUCCESS, job.error
    # Adding, changing and removing run on the master; (dis)connecting on the group's nodes.
    assert sorted(p.name for p in tmp_path.iterdir() if "-network-" in p.name) == [
        "node1-network-add", "node1-network-modify", "node1-network-remove",
        "node2-network-connect", "node2-network-disconnect",
    ]  # fmt: skip
    common = {"GANETI_OBJECT_TYPE": "NETWORK", "GANETI_NETWORK_NAME": "net1"}
    network = {**common, "GANETI_NETWORK_SUBNET": SUBNET, "GANETI_NETWORK_GATEWAY": "10.20.0.1",
               "GANETI_NETWORK_SUBNET6": "2001:db8::/64", "GANETI_NETWORK_TAGS": "a b"}  # fmt: skip
    assert _network_env(tmp_path / "node1-network-add") == {
        **network,
        "GANETI_OP_CODE": "OP_NETWORK_ADD",
    }
    assert _network_env(tmp_path / "node1-network-modify") == {
        **network, "GANETI_OP_CODE": "OP_NETWORK_SET_PARAMS",
        "GANETI_NETWORK_MAC_PREFIX": "aa:bb:cc",
    }  # fmt: skip
    group = {"GANETI_OBJECT_TYPE": "NETWORK", "GANETI_GROUP_NAME": "rack2",
             "GANETI_GROUP_NETWORK_MODE": "bridged", "GANETI_GROUP_NETWORK_LINK": "br0",
             "GANETI_GROUP_NETWORK_VLAN": "7"}  # fmt: skip
    assert _network_env(tmp_path / "node2-network-connect") == {
        **group,
        "GANETI_OP_CODE": "OP_NETWORK_CONNECT",
    }
    assert _network_env(tmp_path / "node2-network-disconnect") == {
        **group,
        "GANETI_OP_CODE": "OP_NETWORK_DISCONNECT",
    }
    assert _network_env(tmp_path / "node1-network-remove") == {
        **common,
        "GANETI_OP_CODE": "OP_NETWORK_REMOVE",
    }


# Storage
async def test_a_network_is_one_row_kept_across_restarts(cl: InProcessCluster) -> None:
    network = await added(cl, gateway="10.20.0.1", tags=["x"])
    await cl.run(modify(add_reserved_ips=["10.20.0.4"]))
    store = SqliteConfigStore(cl.paths.config_db)
    try:
        reread = (await ConfigManager.open(store)).lookup(Network, "net1")
    finally:
        await store.close()
    assert reread == cl.cfg.lookup(Network, "net1")
    assert (reread.uuid, reread.serial_no) == (network.uuid, 2)
    assert reread.ext_reservations == ["10.20.0.0", "10.20.0.1", "10.20.0.4", "10.20.0.15"]
    assert cl.paths.ssconf_file("networks").read_text() == f"{network.uuid} net1\n"


async def test_a_change_read_before_another_is_refused(cl: InProcessCluster) -> None:
    """Compare-and-set: a copy staged from serial 1 cannot overwrite serial 2."""
    network = await added(cl)
    stale = network.copy_for_update()
    await cl.run(modify(mac_prefix="aa:bb:cc"))
    tx = cl.cfg.transaction()
    tx.update(stale)
    with pytest.raises(Conflict, match="networks 'net1' is at serial 2, the change read 1"):
        await tx.commit()
    assert cl.cfg.lookup(Network, "net1").mac_prefix == "aa:bb:cc"
