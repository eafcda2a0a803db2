"""Queries ask only the nodes whose data the answer needs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from corral import constants as C
from tests.unit.query_helpers import QueryWorld

OK = C.RS_NORMAL


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[QueryWorld]:
    world = await QueryWorld.create(tmp_path)
    try:
        await world.instance("a1", admin_state="up")
        await world.instance("b1", node=world.node2, admin_state="up")
        for call in ("all_instances_info", "instances_info"):
            world.answer(call, world.node1, {"a1": {"memory": 128, "vcpus": 1}})
            world.answer(call, world.node2, {"b1": {"memory": 64, "vcpus": 1}})
        yield world
    finally:
        await world.close()


def called(world: QueryWorld) -> list[tuple[str, list[str]]]:
    return [(name, sorted(nodes)) for name, nodes, _ in world.rpc.calls]


async def test_named_instances_are_asked_of_their_nodes_by_name(world: QueryWorld) -> None:
    rows = await world.query("instance", ["name", "status"], ["=", "name", "b1"])
    assert rows == [[[OK, "b1"], [OK, "running"]]]
    assert world.rpc.calls == [("instances_info", [world.node2.uuid], ["fake", ["b1"]])]


async def test_a_filter_on_configuration_fields_asks_only_the_selected_nodes(
    world: QueryWorld,
) -> None:
    qfilter = ["=", "pnode", "node2.example.com"]
    rows = await world.query("instance", ["name", "status", "oper_ram"], qfilter)
    assert rows == [[[OK, "b1"], [OK, "running"], [OK, 64]]]
    assert world.rpc.calls == [("instances_info", [world.node2.uuid], ["fake", ["b1"]])]


async def test_a_filter_selecting_nothing_asks_nobody(world: QueryWorld) -> None:
    rows = await world.query("instance", ["name", "status"], ["=", "os", "no-such-os"])
    assert rows == []
    assert world.rpc.calls == []


async def test_a_filter_on_live_fields_asks_every_node(world: QueryWorld) -> None:
    rows = await world.query("instance", ["name"], ["=", "oper_ram", 64])
    assert rows == [[[OK, "b1"]]]
    assert called(world) == [("all_instances_info", sorted([world.node1.uuid, world.node2.uuid]))]


async def test_a_node_filter_on_configuration_fields_asks_only_those_nodes(
    world: QueryWorld,
) -> None:
    world.answer("node_info", world.node2, {"bootid": "b2"})
    rows = await world.query("node", ["name", "bootid"], ["=", "pinst_cnt", 1])
    assert sorted(rows) == [
        [[OK, "node1.example.com"], [C.RS_NODATA, None]],
        [[OK, "node2.example.com"], [OK, "b2"]],
    ]
    rows = await world.query("node", ["name", "bootid"], ["=", "name", "node2.example.com"])
    assert rows == [[[OK, "node2.example.com"], [OK, "b2"]]]
    world.rpc.calls.clear()
    rows = await world.query("node", ["bootid"], ["!", ["=", "pip", "192.0.2.1"]])
    assert rows == [[[OK, "b2"]]]
    assert called(world) == [("node_info", [world.node2.uuid])]
