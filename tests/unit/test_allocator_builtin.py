"""The built-in allocator (hail) on generated clusters: it never picks a node
that does not fit, and refuses only when none does."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from corral.ipolicy import initial_ipolicy
from corral.services.allocator import hail
from corral.services.allocator import requests as R

POLICY = initial_ipolicy({}, ["file", "diskless"])
RATIO = POLICY["vcpu-ratio"]
GROUPS = {
    "g-pref": {"name": "pref", "alloc_policy": "preferred", "ipolicy": POLICY},
    "g-last": {"name": "last", "alloc_policy": "last_resort", "ipolicy": POLICY},
    "g-none": {"name": "none", "alloc_policy": "unallocable", "ipolicy": POLICY},
}

node_st = st.fixed_dictionaries(
    {
        "group": st.sampled_from(sorted(GROUPS)),
        "offline": st.booleans(),
        "drained": st.booleans(),
        "vm_capable": st.booleans(),
        "total_memory": st.integers(1024, 8192),
        "used_memory": st.integers(0, 8192),
        "total_disk": st.integers(1024, 10240),
        "used_disk": st.integers(0, 10240),
        "total_cpus": st.integers(1, 4),
        "vcpus_used": st.integers(0, 20),
    }
)


def _node(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "group": spec["group"],
        "offline": spec["offline"],
        "drained": spec["drained"],
        "vm_capable": spec["vm_capable"],
        "total_memory": spec["total_memory"],
        "free_memory": max(spec["total_memory"] - spec["used_memory"], 0),
        "total_disk": spec["total_disk"],
        "free_disk": max(spec["total_disk"] - spec["used_disk"], 0),
        "total_cpus": spec["total_cpus"],
    }


def _data(nodes: list[dict[str, Any]], request: dict[str, Any]) -> dict[str, Any]:
    names = [f"node{i}" for i in range(len(nodes))]
    # One existing instance per node carries its used vCPUs.
    instances = {
        f"inst-{name}": {
            "nodes": [name],
            "vcpus": spec["vcpus_used"],
            "memory": 0,
            "admin_state": "down",
            "disk_space_total": 0,
            "disk_template": "diskless",
        }
        for name, spec in zip(names, nodes, strict=True)
    }
    return {
        "ipolicy": POLICY,
        "nodegroups": GROUPS,
        "nodes": {name: _node(spec) for name, spec in zip(names, nodes, strict=True)},
        "instances": instances,
        "request": request,
    }


def _fits(data: dict[str, Any], name: str, need: dict[str, Any]) -> bool:
    """An oracle written apart from the allocator's code."""
    node = data["nodes"][name]
    vcpus = sum(i["vcpus"] for i in data["instances"].values() if i["nodes"][0] == name)
    return (
        not node["offline"]
        and not node["drained"]
        and node["vm_capable"]
        and GROUPS[node["group"]]["alloc_policy"] != "unallocable"
        and (not need["start"] or need["memory"] <= node["free_memory"])
        and (need["disk_template"] != "file" or need["disk"] <= node["free_disk"])
        and vcpus + need["vcpus"] <= node["total_cpus"] * RATIO
    )


request_st = st.fixed_dictionaries(
    {
        "memory": st.integers(128, 8192),
        "vcpus": st.integers(1, 8),
        "disk": st.integers(0, 10240),
        "disk_template": st.sampled_from(["file", "diskless"]),
        "start": st.booleans(),
    }
)


def _alloc(name: str, need: dict[str, Any]) -> dict[str, Any]:
    disks = [{"size": need["disk"], "mode": "rw"}] if need["disk_template"] == "file" else []
    req = R.InstanceAlloc(
        name=name,
        memory=need["memory"],
        vcpus=need["vcpus"],
        disks=disks,
        disk_template=need["disk_template"],
        hypervisor="fake",
        start=need["start"],
    )
    return req.to_dict()


@settings(max_examples=300, deadline=None)
@given(st.lists(node_st, min_size=1, max_size=6), request_st)
def test_allocate_picks_a_fitting_node_or_refuses_when_none_fits(
    nodes: list[dict[str, Any]], need: dict[str, Any]
) -> None:
    data = _data(nodes, _alloc("new", need))
    answer = hail.run(data)
    fitting = [name for name in data["nodes"] if _fits(data, name, need)]
    if not fitting:
        assert not answer["success"]
        assert answer["info"].startswith("No node fits instance new:")
        return
    assert answer["success"], answer
    R.InstanceAlloc("new", 1, 1, [], "diskless", "fake").check_result(answer["result"])
    chosen = answer["result"][0]
    assert chosen in fitting
    # A preferred group's node wins over a last-resort one.
    ranks = {GROUPS[data["nodes"][n]["group"]]["alloc_policy"] for n in fitting}
    if "preferred" in ranks:
        assert GROUPS[data["nodes"][chosen]["group"]]["alloc_policy"] == "preferred"


@settings(max_examples=150, deadline=None)
@given(st.lists(node_st, min_size=1, max_size=5), st.lists(request_st, min_size=1, max_size=6))
def test_multi_allocate_never_overcommits(
    nodes: list[dict[str, Any]], needs: list[dict[str, Any]]
) -> None:
    request = R.MultiAlloc(instances=[]).to_dict()
    request["instances"] = [
        {k: v for k, v in _alloc(f"i{i}", n).items() if k != "type"} for i, n in enumerate(needs)
    ]
    data = _data(nodes, request)
    answer = hail.run(data)
    placed, failed = answer["result"]
    assert sorted([p[0] for p in placed] + failed) == sorted(f"i{i}" for i in range(len(needs)))
    # Replaying the placements one by one, each still fits what the earlier left.
    by_name = {f"i{i}": n for i, n in enumerate(needs)}
    for inst, [node] in placed:
        need = by_name[inst]
        assert _fits(data, node, need)
        entry = data["nodes"][node]
        if need["start"]:
            entry["free_memory"] -= need["memory"]
        if need["disk_template"] == "file":
            entry["free_disk"] -= need["disk"]
        data["instances"][f"inst-{node}"]["vcpus"] += need["vcpus"]


def test_most_free_memory_wins_and_ties_go_to_the_first_name() -> None:
    nodes = [
        {"group": "g-pref", "offline": False, "drained": False, "vm_capable": True,
         "total_memory": 4096, "used_memory": used, "total_disk": 1024, "used_disk": 0,
         "total_cpus": 4, "vcpus_used": 0}
        for used in (3000, 1000, 1000, 2000)
    ]  # fmt: skip
    need = {"memory": 512, "vcpus": 1, "disk": 0, "disk_template": "diskless", "start": True}
    assert hail.run(_data(nodes, _alloc("x", need)))["result"] == ["node1"]


def test_node_evacuate_moves_every_instance_off_its_node() -> None:
    nodes = [
        {"group": "g-pref", "offline": False, "drained": False, "vm_capable": True,
         "total_memory": 4096, "used_memory": 0, "total_disk": 1024, "used_disk": 0,
         "total_cpus": 4, "vcpus_used": 1}
        for _ in range(3)
    ]  # fmt: skip
    data = _data(nodes, R.NodeEvacuate(["inst-node0"], R.EVAC_ALL).to_dict())
    answer = hail.run(data)
    R.check_evac_result(answer["result"])
    moved, failed, jobs = answer["result"]
    assert failed == []
    assert moved[0][0] == "inst-node0" and moved[0][2][0] != "node0"
    assert jobs[0][0]["target_node"] == moved[0][2][0]


def test_a_node_short_of_one_mib_is_refused_with_the_reason() -> None:
    def node(free: int) -> dict[str, Any]:
        return {"group": "g-pref", "offline": False, "drained": False, "vm_capable": True,
                "total_memory": 4096, "used_memory": 4096 - free, "total_disk": 1024,
                "used_disk": 0, "total_cpus": 4, "vcpus_used": 0}  # fmt: skip

    need = {"memory": 1000, "vcpus": 1, "disk": 0, "disk_template": "diskless", "start": True}
    refused = hail.run(_data([node(999)], _alloc("x", need)))
    assert not refused["success"]
    assert "node0: Not enough memory (needed 1000 MiB, free 999 MiB)" in refused["info"]
    assert hail.run(_data([node(1000)], _alloc("x", need)))["result"] == ["node0"]


def _roomy(free_disk: int, group: str = "g-pref", used_memory: int = 0) -> dict[str, Any]:
    return {"group": group, "offline": False, "drained": False, "vm_capable": True,
            "total_memory": 4096, "used_memory": used_memory, "total_disk": 10240,
            "used_disk": 10240 - free_disk, "total_cpus": 4, "vcpus_used": 0}  # fmt: skip


def _mirrored(disk: int) -> dict[str, Any]:
    req = R.InstanceAlloc(
        name="db", memory=512, vcpus=1, disks=[{"size": disk, "mode": "rw"}],
        disk_template="mirrored", hypervisor="fake", required_nodes=2,
    )  # fmt: skip
    return req.to_dict()


def test_a_mirrored_instance_gets_a_secondary_with_room_for_its_copy() -> None:
    policy = initial_ipolicy({}, ["file", "mirrored"])
    # node0: most memory but no room for the copy; node1: the primary's
    # group but short of room; node2: another group; node3 has the room.
    nodes = [_roomy(100), _roomy(9000, used_memory=1000), _roomy(9000, "g-last"),
             _roomy(5000, used_memory=2000)]  # fmt: skip
    data = _data(nodes, _mirrored(4000))
    for group in data["nodegroups"].values():
        group["ipolicy"] = policy
    answer = hail.run(data)
    assert answer["success"], answer
    R.InstanceAlloc("db", 1, 1, [], "mirrored", "fake", required_nodes=2).check_result(
        answer["result"]
    )
    assert answer["result"] == ["node1", "node3"]
    # No second node with room: refused, saying why.
    data = _data([_roomy(9000), _roomy(100), _roomy(9000, "g-last")], _mirrored(4000))
    for group in data["nodegroups"].values():
        group["ipolicy"] = policy
    refused = hail.run(data)
    assert not refused["success"]
    assert refused["info"] == (
        "No secondary node fits instance db beside node0: node0: the primary node; node1: Not"
        " enough disk space (needed 4000 MiB, free 100 MiB); node2: in another group than the"
        " primary node"
    )
