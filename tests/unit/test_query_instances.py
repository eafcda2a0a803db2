"""The instance resource's fields: values as luxid gives them, and the node
calls made only for the fields that need them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from corral import constants as C
from corral.master.resources import instances
from corral.objects import NIC, Disk, NodeGroup
from tests.unit.query_helpers import QueryWorld

OK, NODATA, UNAVAIL, OFFLINE = C.RS_NORMAL, C.RS_NODATA, C.RS_UNAVAIL, C.RS_OFFLINE


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[QueryWorld]:
    w = await QueryWorld.create(tmp_path)
    yield w
    await w.close()


def _file_disk(size: int, **extra: object) -> Disk:
    return Disk(size=size, dev_type="file", logical_id=["loop", "/srv/d"], **extra)


async def test_config_fields_need_no_node(world: QueryWorld) -> None:
    await world.instance("web1")
    fields = ["name", "pnode", "admin_state", "disks_active", "forthcoming", "be/vcpus", "mac"]
    assert await world.query("instance", fields) == [
        [
            [OK, "web1"],
            [OK, "node1.example.com"],
            [OK, "down"],
            [OK, False],
            [OK, False],
            [OK, 1],
            [UNAVAIL, None],
        ]
    ]
    assert world.rpc.calls == []


async def test_node_groups_of_primary_and_secondaries(world: QueryWorld) -> None:
    other = NodeGroup(name="other")
    await world.add(other)
    node3 = world._node("node3.example.com", "192.0.2.3", other)
    await world.add(node3)
    await world.instance("web1", secondary_nodes=[node3.uuid])
    cells = await world.values(
        "instance",
        ["pnode.group", "pnode.group.uuid", "snodes", "snodes.group", "snodes.group.uuid"],
        "web1",
    )
    assert cells == {
        "pnode.group": [OK, "default"],
        "pnode.group.uuid": [OK, world.group.uuid],
        "snodes": [OK, ["node3.example.com"]],
        "snodes.group": [OK, ["other"]],
        "snodes.group.uuid": [OK, [other.uuid]],
    }


async def test_nic_fields_and_aliases(world: QueryWorld) -> None:
    nics = [
        NIC(mac="aa:00:00:00:00:01", ip="192.0.2.50", name="eth0"),
        NIC(
            mac="aa:00:00:00:00:02",
            nicparams={"mode": "openvswitch", "link": "ovs0", "vlan": ".100"},
            network="net-uuid",
        ),
    ]
    await world.instance("web1", nics=nics)
    fields = ["ip", "mac", "bridge", "nic_mode", "nic_link", "nic_network"]
    fields += ["nic.ip/1", "nic.name/1", "nic.vlan/0", "nic.vlan/1", "nic.bridge/1"]
    fields += ["nic.uuid/0", "nic.mac/2", "nic.vlans", "nic.bridges", "nic.networks"]
    fields += ["custom_nicparams"]
    cells = await world.values("instance", fields, "web1")
    assert cells == {
        "ip": [OK, "192.0.2.50"],
        "mac": [OK, "aa:00:00:00:00:01"],
        "bridge": [OK, "br0"],
        "nic_mode": [OK, "bridged"],
        "nic_link": [OK, "br0"],
        "nic_network": [UNAVAIL, None],
        "nic.ip/1": [UNAVAIL, None],
        "nic.name/1": [UNAVAIL, None],
        "nic.vlan/0": [UNAVAIL, None],
        "nic.vlan/1": [OK, ".100"],
        "nic.bridge/1": [UNAVAIL, None],
        "nic.uuid/0": [OK, nics[0].uuid],
        "nic.mac/2": [UNAVAIL, None],
        "nic.vlans": [OK, [None, ".100"]],
        "nic.bridges": [OK, ["br0", None]],
        "nic.networks": [OK, [None, "net-uuid"]],
        "custom_nicparams": [OK, [{}, nics[1].nicparams]],
    }


async def test_disk_fields(world: QueryWorld) -> None:
    disks = [_file_disk(1024, name="root", spindles=2), _file_disk(512)]
    await world.instance("web1", disks=disks, disk_template="file", disks_active=True)
    fields = ["disk.spindles", "disk.spindles/0", "disk.spindles/1", "disk.name/0"]
    fields += ["disk.name/1", "disk.uuid/1", "disk.size/15", "sda_size", "sdb_size"]
    fields += ["disk_usage", "disks_active"]
    cells = await world.values("instance", fields, "web1")
    assert cells == {
        "disk.spindles": [OK, [2, None]],
        "disk.spindles/0": [OK, 2],
        "disk.spindles/1": [UNAVAIL, None],
        "disk.name/0": [OK, "root"],
        "disk.name/1": [UNAVAIL, None],
        "disk.uuid/1": [OK, disks[1].uuid],
        "disk.size/15": [UNAVAIL, None],
        "sda_size": [OK, 1024],
        "sdb_size": [OK, 512],
        "disk_usage": [OK, 1536],
        "disks_active": [OK, True],
    }


async def test_parameters(world: QueryWorld) -> None:
    cluster = world.cfg.cluster.model_copy(deep=True)
    cluster.osparams = {"debootstrap": {"dhcp": "yes", "arch": "amd64"}}
    await world.update(cluster)
    await world.instance("web1", osparams={"dhcp": "no"}, beparams={"vcpus": 2})
    fields = ["osparams", "custom_osparams", "hvparams", "beparams", "vcpus", "network_port"]
    cells = await world.values("instance", fields, "web1")
    assert cells["osparams"] == [OK, {"dhcp": "no", "arch": "amd64"}]
    assert cells["custom_osparams"] == [OK, {"dhcp": "no"}]
    # migration_mode is a cluster-wide hypervisor parameter, not an instance's.
    assert cells["hvparams"] == [OK, {}]
    assert cells["beparams"][1]["vcpus"] == 2
    assert cells["vcpus"] == [OK, 2]
    assert cells["network_port"] == [UNAVAIL, None]


async def test_aliases_are_defined_as_their_fields() -> None:
    fields = instances.FIELDS.fields
    for alias, name in instances.ALIASES:
        assert fields[alias].definition() == {**fields[name].definition(), "name": alias}


async def test_object_fields_name_the_instance() -> None:
    definitions = instances.FIELDS.fields
    assert definitions["uuid"].doc == "Instance UUID"
    assert definitions["serial_no"].doc == (
        "Instance object serial number, incremented on each modification"
    )
    assert definitions["disk.size/10"].doc == "Disk size of 11th disk"
    assert definitions["nic.ip/2"].doc == "IP address of 3rd network interface"


async def test_console_and_state_follow_the_primary_node(world: QueryWorld) -> None:
    node3 = world._node("node3.example.com", "192.0.2.3", world.group, offline=True)
    await world.add(node3)
    await world.instance("up", admin_state="up")
    await world.instance("up2", admin_state="up")
    await world.instance("stopped", admin_state="down")
    await world.instance("down-node", node=world.node2)
    await world.instance("off-node", node=node3)
    running = {"up": {"memory": 128, "vcpus": 1}, "up2": {"memory": 128, "vcpus": 1}}
    world.answer("all_instances_info", world.node1, running)
    # The node's hypervisor describes the console; an ssh one gets the node's ssh port.
    ssh = {"instance": "up", "kind": "ssh", "host": "node1.example.com", "user": "root"}
    message = {"instance": "up2", "kind": "msg", "message": "No serial shell for instance up2"}
    world.answer("instance_console", world.node1, [{**ssh, "command": ["socat"]}, message])
    rows = await world.query("instance", ["name", "console", "status", "oper_ram"])
    by_name = {row[0][1]: row[1:] for row in rows}
    console = {**ssh, "command": ["socat"], "port": 22}
    assert by_name["up"] == [[OK, console], [OK, "running"], [OK, 128]]
    assert by_name["up2"] == [[OK, message], [OK, "running"], [OK, 128]]
    assert by_name["stopped"] == [[UNAVAIL, None], [OK, "ADMIN_down"], [UNAVAIL, None]]
    assert by_name["down-node"] == [[NODATA, None], [OK, "ERROR_nodedown"], [NODATA, None]]
    assert by_name["off-node"] == [[OFFLINE, None], [OK, "ERROR_nodeoffline"], [OFFLINE, None]]
    # One call to the online primary nodes, one for the running instances' consoles.
    calls = [(name, sorted(nodes)) for name, nodes, _ in world.rpc.calls]
    assert calls == [
        ("all_instances_info", sorted([world.node1.uuid, world.node2.uuid])),
        ("instance_console", [world.node1.uuid]),
    ]
    assert [inst["name"] for inst in world.rpc.calls[1][2][0]] == ["up", "up2"]
    assert world.rpc.calls[1][2][1] == "node1.example.com"
