"""What an allocator is asked (Ganeti's iallocator request modes) and what
each mode's answer must look like.

A request is the ``"request"`` member of the allocator's input; the shape
of each mode and of its ``result`` is Ganeti 3.0.2's (doc/iallocator.rst).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from corral import errors

ALLOCATE = "allocate"
RELOCATE = "relocate"
CHANGE_GROUP = "change-group"
NODE_EVACUATE = "node-evacuate"
MULTI_ALLOCATE = "multi-allocate"

EVAC_PRIMARY = "primary-only"
EVAC_SECONDARY = "secondary-only"
EVAC_ALL = "all"
EVAC_MODES = (EVAC_PRIMARY, EVAC_SECONDARY, EVAC_ALL)

# Opcodes an evacuation answer may ask for (Ganeti's _JOB_LIST, and Corral's
# move for disks that only a copy brings to another node).
EVAC_OPCODES = (
    "OP_INSTANCE_FAILOVER",
    "OP_INSTANCE_MIGRATE",
    "OP_INSTANCE_REPLACE_DISKS",
    "OP_INSTANCE_MOVE",
)


def disk_space_total(disks: list[dict[str, Any]]) -> int:
    """Ganeti's ComputeDiskSize for the templates Corral has: the sizes' sum."""
    return sum(int(d["size"]) for d in disks)


@dataclass
class InstanceAlloc:
    """Place a new instance (``allocate``; one entry of ``multi-allocate``)."""

    name: str
    memory: int
    vcpus: int
    disks: list[dict[str, Any]]
    disk_template: str
    hypervisor: str
    os: str = ""
    tags: list[str] = field(default_factory=list)
    nics: list[dict[str, Any]] = field(default_factory=list)
    spindle_use: int = 1
    group_name: str | None = None
    node_whitelist: list[str] | None = None
    # Whether the instance starts once created (its memory is then needed).
    start: bool = True
    # The nodes its disks need: 2 for a template with a secondary (mirrored).
    required_nodes: int = 1

    MODE = ALLOCATE

    def to_dict(self) -> dict[str, Any]:
        out = {
            "type": self.MODE,
            "name": self.name,
            "disk_template": self.disk_template,
            "group_name": self.group_name,
            "tags": list(self.tags),
            "os": self.os,
            "vcpus": self.vcpus,
            "memory": self.memory,
            "spindle_use": self.spindle_use,
            "disks": [{**d, "dev_type": self.disk_template} for d in self.disks],
            "disk_space_total": disk_space_total(self.disks),
            "nics": list(self.nics),
            "required_nodes": self.required_nodes,
            "hypervisor": self.hypervisor,
            # Corral's addition; scripts written for Ganeti ignore it.
            "start": self.start,
        }
        if self.node_whitelist is not None:
            out["restrict-to-nodes"] = list(self.node_whitelist)
        return out

    def check_result(self, result: Any) -> None:
        _check(_is_names(result), "a list of node names", result)
        roles = "the instance's primary" if self.required_nodes == 1 else "primary, then secondary"
        count = self.required_nodes
        _check(len(result) == count, f"exactly {count} node(s) ({roles})", result)


@dataclass
class MultiAlloc:
    """Place several new instances at once (``multi-allocate``)."""

    instances: list[InstanceAlloc]

    MODE = MULTI_ALLOCATE

    def to_dict(self) -> dict[str, Any]:
        entries = []
        for inst in self.instances:
            entry = inst.to_dict()
            del entry["type"]
            entries.append(entry)
        return {"type": self.MODE, "instances": entries}

    def check_result(self, result: Any) -> None:
        ok = (
            isinstance(result, list)
            and len(result) == 2
            and isinstance(result[0], list)
            and all(
                isinstance(e, list) and len(e) == 2 and _is_name(e[0]) and _is_names(e[1])
                for e in result[0]
            )
            and _is_names(result[1])
        )
        _check(ok, "[[[instance, [nodes]], ...], [failed instances]]", result)


@dataclass
class Relocate:
    """Find a new secondary for an instance (``relocate``)."""

    name: str
    disk_space_total: int
    relocate_from: list[str]

    MODE = RELOCATE

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.MODE,
            "name": self.name,
            "disk_space_total": self.disk_space_total,
            "required_nodes": 1,
            "relocate_from": list(self.relocate_from),
        }

    def check_result(self, result: Any) -> None:
        _check(_is_names(result) and len(result) == 1, "a list of one node name", result)


@dataclass
class NodeEvacuate:
    """Move instances off their nodes (``node-evacuate``)."""

    instances: list[str]
    evac_mode: str

    MODE = NODE_EVACUATE

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.MODE, "instances": list(self.instances), "evac_mode": self.evac_mode}

    def check_result(self, result: Any) -> None:
        check_evac_result(result)


@dataclass
class ChangeGroup:
    """Move instances to other node groups (``change-group``; group uuids)."""

    instances: list[str]
    target_groups: list[str]

    MODE = CHANGE_GROUP

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.MODE,
            "instances": list(self.instances),
            "target_groups": list(self.target_groups),
        }

    def check_result(self, result: Any) -> None:
        check_evac_result(result)


Request = InstanceAlloc | MultiAlloc | Relocate | NodeEvacuate | ChangeGroup


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _is_names(value: Any) -> bool:
    return isinstance(value, list) and all(_is_name(v) for v in value)


def _is_job(job: Any) -> bool:
    return isinstance(job, list) and all(
        isinstance(op, dict) and op.get("OP_ID") in EVAC_OPCODES for op in job
    )


_EVAC_PARTS: tuple[tuple[str, Callable[[Any], bool]], ...] = (
    (
        "moved",
        lambda e: (
            isinstance(e, list)
            and len(e) == 3
            and _is_name(e[0])
            and _is_name(e[1])
            and _is_names(e[2])
        ),
    ),
    (
        "failed",
        lambda e: (
            isinstance(e, list)
            and len(e) == 2
            and _is_name(e[0])
            and (e[1] is None or isinstance(e[1], str))
        ),
    ),
    ("jobs", _is_job),
)


def check_evac_result(result: Any) -> None:
    """Ganeti's _NEVAC_RESULT: ``[moved, failed, jobs]``."""
    _check(isinstance(result, list) and len(result) == 3, "[moved, failed, jobs]", result)
    for (what, valid), part in zip(_EVAC_PARTS, result, strict=True):
        _check(
            isinstance(part, list) and all(valid(e) for e in part), f"a valid '{what}' list", part
        )


def _check(ok: bool, expected: str, got: Any) -> None:
    if not ok:
        raise errors.OpExecError(
            f"iallocator returned invalid result, expected {expected}, got {got!r}"
        )
