"""The node and group resources' fields: filled parameters, live data as luxid
gives it (RS_OFFLINE, RS_NODATA), and node calls only for live fields."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from corral import constants as C
from corral.diskparams import DISK_DT_DEFAULTS
from corral.master.resources import nodes
from corral.services.ndparams import ND_DEFAULTS
from tests.unit.query_helpers import QueryWorld

OK, NODATA, UNAVAIL, OFFLINE = C.RS_NORMAL, C.RS_NODATA, C.RS_UNAVAIL, C.RS_OFFLINE

NODE_INFO = {
    "bootid": "0f6f-boot",
    "memory_total": 4096,
    "memory_free": 3000,
    "memory_dom0": 1096,
    "cpu_total": 4,
    "cpu_dom0": 4,
    "cpu_nodes": 1,
    "cpu_sockets": 2,
    "storage": [{"path": "/srv/ganeti/file-storage", "total": 10000, "free": 8000}],
}
HV_INFO = {"memory_total": 4096, "memory_free": 2872, "memory_dom0": 1096}
LIVE = ["bootid", "ctotal", "cnos", "cnodes", "csockets", "dtotal", "dfree", "spfree", "sptotal"]
LIVE += ["mtotal", "mfree", "mnode"]


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[QueryWorld]:
    w = await QueryWorld.create(tmp_path)
    yield w
    await w.close()


async def test_live_fields_from_node_info_and_hypervisor_info(world: QueryWorld) -> None:
    world.answer("node_info", world.node1, NODE_INFO)
    world.answer("hypervisor_info", world.node1, HV_INFO)
    cells = await world.values("node", LIVE, "node1.example.com")
    assert cells == {
        "bootid": [OK, "0f6f-boot"],
        "ctotal": [OK, 4],
        "cnos": [OK, 4],
        "cnodes": [OK, 1],
        "csockets": [OK, 2],
        "dtotal": [OK, 10000],
        "dfree": [OK, 8000],
        # No LVM physical volumes, so no spindles.
        "spfree": [NODATA, None],
        "sptotal": [NODATA, None],
        "mtotal": [OK, 4096],
        # The hypervisor's view: a running instance's memory is not free.
        "mfree": [OK, 2872],
        "mnode": [OK, 1096],
    }
    storage = ["file", world.cfg.cluster.file_storage_dir]
    assert sorted(world.rpc.calls) == [
        ("hypervisor_info", [world.node1.uuid, world.node2.uuid], ["fake", storage]),
        ("node_info", [world.node1.uuid, world.node2.uuid], [[storage]]),
    ]


async def test_unreachable_node_has_no_data_and_offline_node_is_offline(
    world: QueryWorld,
) -> None:
    node3 = world._node("node3.example.com", "192.0.2.3", world.group, offline=True)
    await world.add(node3)
    rows = await world.query("node", ["name", *LIVE])
    by_name = {row[0][1]: row[1:] for row in rows}
    assert by_name["node2.example.com"] == [[NODATA, None]] * len(LIVE)
    assert by_name["node3.example.com"] == [[OFFLINE, None]] * len(LIVE)
    # The offline node is never asked.
    assert all(node3.uuid not in called for _, called, _ in world.rpc.calls)


@pytest.mark.parametrize(
    ("fields", "calls"),
    [
        (["name", "role", "pinst_cnt", "ndparams", "spfree"], []),
        (["mfree"], ["hypervisor_info"]),
        (["bootid", "ctotal"], ["node_info"]),
        (["dfree"], ["node_info"]),
    ],
)
async def test_only_live_fields_call_nodes(
    world: QueryWorld, fields: list[str], calls: list[str]
) -> None:
    await world.query("node", fields)
    assert [name for name, _, _ in world.rpc.calls] == calls
    if calls == ["node_info"]:
        # The storage unit is asked for only with a storage field.
        unit = ["file", world.cfg.cluster.file_storage_dir]
        storage = [unit] if "dfree" in fields else []
        assert world.rpc.calls[0][2] == [storage]


async def test_node_parameters_are_filled(world: QueryWorld) -> None:
    cluster = world.cfg.cluster.model_copy(deep=True)
    cluster.ndparams = {"ssh_port": 2222, "spindle_count": 4}
    await world.update(cluster)
    group = world.group.model_copy(deep=True)
    group.ndparams = {"spindle_count": 8}
    await world.update(group)
    node = world.node2.model_copy(deep=True)
    node.ndparams = {"oob_program": "/bin/oob"}
    await world.update(node)
    fields = ["ndparams", "custom_ndparams", "ndp/ssh_port", "ndp/spindle_count", "powered"]
    fields += ["hv_state", "disk_state"]
    one = await world.values("node", fields, "node1.example.com")
    two = await world.values("node", fields, "node2.example.com")
    assert one["ndparams"] == [OK, {**ND_DEFAULTS, "ssh_port": 2222, "spindle_count": 8}]
    assert one["custom_ndparams"] == [OK, {}]
    assert (one["ndp/ssh_port"], one["ndp/spindle_count"]) == ([OK, 2222], [OK, 8])
    # Without an out-of-band program, whether a node is powered is not known.
    assert one["powered"] == [UNAVAIL, None]
    assert two["custom_ndparams"] == [OK, {"oob_program": "/bin/oob"}]
    assert two["powered"] == [OK, True]
    assert one["hv_state"] == one["disk_state"] == [UNAVAIL, None]


async def test_roles_and_instance_lists(world: QueryWorld) -> None:
    drained = world._node("node3.example.com", "192.0.2.3", world.group, drained=True, offline=True)
    await world.add(drained)
    node2 = world.node2.model_copy(deep=True)
    node2.master_candidate = False
    await world.update(node2)
    for name in ("web10", "web9", "web1"):
        await world.instance(name)
    rows = await world.query("node", ["name", "role", "pinst_list", "pinst_cnt"])
    assert rows == [
        [[OK, "node1.example.com"], [OK, "M"], [OK, ["web1", "web9", "web10"]], [OK, 3]],
        [[OK, "node2.example.com"], [OK, "R"], [OK, []], [OK, 0]],
        [[OK, "node3.example.com"], [OK, "C"], [OK, []], [OK, 0]],
    ]
    node3 = world.cfg.get(type(drained), drained.uuid)
    assert node3 is not None
    changed = node3.model_copy(deep=True)
    changed.master_candidate = False
    await world.update(changed)
    rows = await world.query("node", ["role"], ["=", "name", "node3.example.com"])
    assert rows == [[[OK, "D"]]]


async def test_group_parameters_are_filled(world: QueryWorld) -> None:
    group = world.group.model_copy(deep=True)
    group.ndparams = {"ssh_port": 2022}
    group.diskparams = {"plain": {"stripes": 2}}
    group.ipolicy = {"vcpu-ratio": 2.0}
    await world.update(group)
    fields = ["ndparams", "custom_ndparams", "ndp/ssh_port", "diskparams", "custom_diskparams"]
    fields += ["ipolicy", "custom_ipolicy", "node_list"]
    cells = await world.values("group", fields, "default")
    cluster_policy = world.cfg.cluster.ipolicy
    assert cells["ndparams"] == [OK, {**ND_DEFAULTS, "ssh_port": 2022}]
    assert cells["custom_ndparams"] == [OK, {"ssh_port": 2022}]
    assert cells["ndp/ssh_port"] == [OK, 2022]
    assert cells["diskparams"] == [OK, {**DISK_DT_DEFAULTS, "plain": {"stripes": 2}}]
    assert cells["custom_diskparams"] == [OK, {"plain": {"stripes": 2}}]
    assert cells["ipolicy"] == [OK, {**cluster_policy, "vcpu-ratio": 2.0}]
    assert cells["custom_ipolicy"] == [OK, {"vcpu-ratio": 2.0}]
    assert cells["node_list"] == [OK, ["node1.example.com", "node2.example.com"]]


def test_definitions_name_their_object() -> None:
    assert nodes.NODE_FIELDS.fields["uuid"].doc == "Node UUID"
    assert nodes.GROUP_FIELDS.fields["serial_no"].doc == (
        "Group object serial number, incremented on each modification"
    )
    assert nodes.NODE_FIELDS.fields["ndp/cpu_speed"].definition() == {
        "name": "ndp/cpu_speed",
        "title": "ndp/cpu_speed",
        "kind": C.QFT_NUMBER_FLOAT,
        "doc": 'The "cpu_speed" node parameter',
    }
