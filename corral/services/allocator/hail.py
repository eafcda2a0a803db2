"""Corral's ``hail``: the built-in allocator's answer to each request mode.

It takes Ganeti's iallocator input and gives Ganeti's answer
``{"success", "info", "result"}``, as an external script would; placement
rules are in :mod:`corral.services.allocator.builtin`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from corral import constants as C
from corral.services.allocator import requests as R
from corral.services.allocator.builtin import (
    NodeState,
    Spec,
    best_node,
    cluster_state,
    describe_refusals,
)
from corral.storage import templates

NAME = "hail"

# How an instance reaches another node: a migration (failover if it is down)
# when every node sees its disks, else a copy of the disks.
_MIGRATE = "OP_INSTANCE_MIGRATE"
_MOVE = "OP_INSTANCE_MOVE"


def _answer(success: bool, info: str, result: Any) -> dict[str, Any]:
    return {"success": success, "info": info, "result": result}


def _request_spec(req: dict[str, Any]) -> Spec:
    return Spec(
        # An instance created stopped needs no memory yet (as with -n).
        memory=int(req["memory"]) if req.get("start", True) else 0,
        vcpus=int(req["vcpus"]),
        disk=int(req["disk_space_total"]),
        template=req["disk_template"],
    )


def _alloc_filter(data: dict[str, Any], req: dict[str, Any]) -> Callable[[NodeState], str | None]:
    """Which nodes a new instance may go to: the whitelist, the named group,
    groups connected to every network of its NICs."""
    whitelist = req.get("restrict-to-nodes")
    group_name = req.get("group_name")
    networks = {nic["network"] for nic in req.get("nics", []) if nic.get("network")}

    def allowed(node: NodeState) -> str | None:
        group = data["nodegroups"][node.group]
        if whitelist is not None and node.name not in whitelist:
            return "not among the allowed nodes"
        if group_name and group["name"] != group_name:
            return f"not in group {group_name}"
        if not networks <= set(group.get("networks", [])):
            return (
                f"group {group['name']} is not connected to a network required by"
                f" instance {req['name']}"
            )
        return None

    return allowed


def _place_one(
    data: dict[str, Any], nodes: dict[str, NodeState], req: dict[str, Any]
) -> tuple[list[str], str]:
    """Place one new instance; its nodes, the primary first (capacity
    taken), or none and why.  A second node (``required_nodes`` 2: a
    mirrored template) holds a copy of the disks only: it needs their space,
    in the primary's group."""
    spec = _request_spec(req)
    allowed = _alloc_filter(data, req)
    node, refused = best_node(nodes, spec, allowed)
    if node is None:
        return [], f"No node fits instance {req['name']}: {describe_refusals(refused)}"
    chosen = [node]
    if int(req.get("required_nodes", 1)) == 2:
        copy = Spec(memory=0, vcpus=0, disk=spec.disk, template=spec.template)

        def beside(other: NodeState) -> str | None:
            if other is node:
                return "the primary node"
            if other.group != node.group:
                return "in another group than the primary node"
            return allowed(other)

        second, refused = best_node(nodes, copy, beside)
        if second is None:
            return [], (
                f"No secondary node fits instance {req['name']} beside {node.name}:"
                f" {describe_refusals(refused)}"
            )
        chosen.append(second)
        second.place(copy)
    node.place(spec)
    names = [n.name for n in chosen]
    return names, f"Instance {req['name']} goes to {', '.join(names)}"


def allocate(data: dict[str, Any], req: dict[str, Any]) -> dict[str, Any]:
    nodes, info = _place_one(data, cluster_state(data), req)
    return _answer(bool(nodes), info, nodes)


def multi_allocate(data: dict[str, Any], req: dict[str, Any]) -> dict[str, Any]:
    """Each instance in turn, on what the previous ones left free."""
    nodes = cluster_state(data)
    placed: list[list[Any]] = []
    failed: list[str] = []
    reasons = []
    for entry in req["instances"]:
        chosen, info = _place_one(data, nodes, entry)
        if not chosen:
            failed.append(entry["name"])
            reasons.append(info)
        else:
            placed.append([entry["name"], chosen])
    return _answer(True, "; ".join(reasons) or "All instances placed", [placed, failed])


def _instance_spec(inst: dict[str, Any]) -> Spec:
    """What a running instance needs on a new node (memory only when it is up)."""
    return Spec(
        memory=int(inst["memory"]) if inst["admin_state"] == "up" else 0,
        vcpus=int(inst["vcpus"]),
        disk=int(inst["disk_space_total"]),
        template=inst["disk_template"],
    )


def _mirrored(inst: dict[str, Any]) -> bool:
    """Whether the instance keeps copies on secondary nodes (Ganeti's DTS_INT_MIRROR)."""
    template = templates.DISK_TEMPLATES.get(inst["disk_template"])
    return template is not None and template.mirroring is templates.Mirroring.INTERNAL


def _copy_spec(inst: dict[str, Any]) -> Spec:
    """What a secondary node holds of an instance: a copy of its disks."""
    return Spec(
        memory=0, vcpus=0, disk=int(inst["disk_space_total"]), template=inst["disk_template"]
    )


def relocate(data: dict[str, Any], req: dict[str, Any]) -> dict[str, Any]:
    """A new node for an instance, away from ``relocate_from``, in its group:
    a new secondary of a mirrored instance (room for a copy of its disks),
    else a new primary."""
    inst = data["instances"][req["name"]]
    nodes = cluster_state(data)
    avoid = set(req["relocate_from"]) | set(inst["nodes"])
    group = nodes[inst["nodes"][0]].group

    def allowed(node: NodeState) -> str | None:
        if node.name in avoid:
            return "one of the instance's nodes"
        return None if node.group == group else "in another group"

    spec = _copy_spec(inst) if _mirrored(inst) else _instance_spec(inst)
    node, refused = best_node(nodes, spec, allowed)
    if node is None:
        return _answer(False, f"No node fits {req['name']}: {describe_refusals(refused)}", [])
    return _answer(True, f"Instance {req['name']} goes to {node.name}", [node.name])


def _evacuate(
    data: dict[str, Any],
    names: list[str],
    target_groups: Callable[[str], set[str]],
    secondary_only: bool = False,
    same_group: bool = True,
) -> dict[str, Any]:
    """Each instance to the best node of its target groups, off its nodes
    (``secondary_only``: a new secondary node for each mirrored instance)."""
    nodes = cluster_state(data)
    groups = data["nodegroups"]
    moved: list[list[Any]] = []
    failed: list[list[Any]] = []
    jobs: list[list[dict[str, Any]]] = []
    for name in names:
        inst = data["instances"].get(name)
        why = _unmovable(inst, secondary_only, same_group)
        if why is not None or inst is None:
            failed.append([name, why])
            continue
        if _mirrored(inst) and not secondary_only:
            # To its secondary, which holds its disks (the node keeps a copy).
            secondary = inst["nodes"][1]
            moved.append([name, groups[nodes[secondary].group]["name"], [secondary]])
            jobs.append([{"OP_ID": _MIGRATE, "instance_name": name, "allow_failover": True}])
            continue
        spec = _copy_spec(inst) if secondary_only else _instance_spec(inst)
        wanted = target_groups(nodes[inst["nodes"][0]].group)

        node, refused = best_node(nodes, spec, _away_from(inst["nodes"], wanted))
        if node is None:
            failed.append([name, f"no node fits: {describe_refusals(refused)}"])
            continue
        node.place(spec)
        moved.append([name, groups[node.group]["name"], [node.name]])
        op = (
            _new_secondary_op(name, node.name)
            if secondary_only
            else _move_op(inst, name, node.name)
        )
        jobs.append([op])
    return _answer(
        True, f"{len(moved)} instances moved, {len(failed)} failed", [moved, failed, jobs]
    )


def _unmovable(inst: dict[str, Any] | None, secondary_only: bool, same_group: bool) -> str | None:
    """Why the evacuation cannot move ``inst``, or None."""
    if inst is None:
        return "unknown instance"
    if secondary_only and not _mirrored(inst):
        return "instance has no secondary node"
    if _mirrored(inst) and not same_group:
        return "a mirrored instance cannot change its group yet"
    return None


def _new_secondary_op(name: str, node: str) -> dict[str, Any]:
    """Ganeti's job for a new secondary node: replace-disks onto it."""
    return {
        "OP_ID": "OP_INSTANCE_REPLACE_DISKS",
        "instance_name": name,
        "mode": C.REPLACE_DISK_CHG,
        "remote_node": node,
        "disks": [],
    }


def _away_from(current: list[str], groups: set[str]) -> Callable[[NodeState], str | None]:
    """Nodes other than ``current``, in ``groups``."""

    def allowed(node: NodeState) -> str | None:
        if node.name in current:
            return "one of the instance's nodes"
        return None if node.group in groups else "not in a target group"

    return allowed


def _move_op(inst: dict[str, Any], name: str, target: str) -> dict[str, Any]:
    template = templates.DISK_TEMPLATES.get(inst["disk_template"])
    if template is not None and not template.moves.migrate:
        return {"OP_ID": _MOVE, "instance_name": name, "target_node": target}
    return {"OP_ID": _MIGRATE, "instance_name": name, "target_node": target, "allow_failover": True}


def node_evacuate(data: dict[str, Any], req: dict[str, Any]) -> dict[str, Any]:
    """Instances leave their primary node, for another of the same group."""
    return _evacuate(
        data,
        req["instances"],
        lambda group: {group},
        secondary_only=req["evac_mode"] == R.EVAC_SECONDARY,
    )


def change_group(data: dict[str, Any], req: dict[str, Any]) -> dict[str, Any]:
    """Instances go to one of the target groups (any other group if none given)."""
    targets = set(req["target_groups"])
    every = set(data["nodegroups"])
    return _evacuate(
        data, req["instances"], lambda group: targets or every - {group}, same_group=False
    )


_MODES: dict[str, Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]] = {
    R.ALLOCATE: allocate,
    R.MULTI_ALLOCATE: multi_allocate,
    R.RELOCATE: relocate,
    R.NODE_EVACUATE: node_evacuate,
    R.CHANGE_GROUP: change_group,
}


def run(data: dict[str, Any]) -> dict[str, Any]:
    """The answer ``{"success", "info", "result"}`` to the allocator input ``data``."""
    request = data["request"]
    handler = _MODES.get(request.get("type"))
    if handler is None:
        return _answer(False, f"Unknown request type '{request.get('type')}'", [])
    return handler(data, request)
