"""The built-in allocator's core (Corral's ``hail``): node capacities, fit and score.

A node can take an instance when it is online, not drained, vm-capable, in
an allocatable group (and the requested one), and has the instance's memory,
disk (for templates whose storage the nodes report) and vCPUs (within the
group policy's ``vcpu-ratio``) free.  Of those, nodes of ``preferred`` groups
come before ``last_resort`` ones; then the node left with the most free
resources wins (the sum of the free fractions of memory, disk and vCPUs);
ties go to the first name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from corral import ipolicy as IP
from corral import storage_names as N
from corral.services.allocator.model import reports_storage

# Group allocation policies, in the order they are tried (Ganeti's).
POLICY_RANK = {"preferred": 0, "last_resort": 1}
# How many refused nodes a failure message names.
_SHOWN_REASONS = 8
# Scores are rounded so that the nodes' jitter (free memory read a moment
# apart) does not outweigh real differences; the name then breaks ties.
_SCORE_DIGITS = 4


@dataclass
class Spec:
    """What an instance needs of its node."""

    memory: int
    vcpus: int
    disk: int
    template: str


@dataclass
class NodeState:
    """A node's capacity as the allocation goes on."""

    name: str
    group: str
    rank: int
    usable: str | None  # why the node can take no instance at all, or None
    total_memory: int
    free_memory: int
    total_disk: int
    free_disk: int
    cpu_limit: float  # vCPUs the node may carry under the policy
    used_vcpus: int
    templates: list[str]

    def refusal(self, spec: Spec) -> str | None:
        """Why ``spec`` does not fit here, or None."""
        if self.usable is not None:
            return self.usable
        if spec.template not in self.templates:
            return f"disk template {spec.template} not allowed by the group's policy"
        if spec.memory > self.free_memory:
            return f"Not enough memory (needed {spec.memory} MiB, free {self.free_memory} MiB)"
        if reports_storage(spec.template) and spec.disk > self.free_disk:
            return f"Not enough disk space (needed {spec.disk} MiB, free {self.free_disk} MiB)"
        if self.used_vcpus + spec.vcpus > self.cpu_limit:
            return (
                f"too many vCPUs ({self.used_vcpus + spec.vcpus} would exceed the"
                f" limit of {self.cpu_limit:g})"
            )
        return None

    def score(self, spec: Spec) -> float:
        """The free fractions left after placing ``spec`` (higher is better)."""
        total = _fraction(self.free_memory - spec.memory, self.total_memory)
        if reports_storage(spec.template):
            total += _fraction(self.free_disk - spec.disk, self.total_disk)
        total += 1.0 - _fraction(self.used_vcpus + spec.vcpus, self.cpu_limit)
        return round(total, _SCORE_DIGITS)

    def place(self, spec: Spec) -> None:
        self.free_memory -= spec.memory
        if reports_storage(spec.template):
            self.free_disk -= spec.disk
        self.used_vcpus += spec.vcpus


def _fraction(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0


def cluster_state(data: dict[str, Any]) -> dict[str, NodeState]:
    """Node name → its state, from the allocator input ``data``."""
    used: dict[str, int] = {}
    for inst in data["instances"].values():
        if inst["nodes"]:
            used[inst["nodes"][0]] = used.get(inst["nodes"][0], 0) + int(inst["vcpus"])
    groups = data["nodegroups"]
    out = {}
    for name, node in data["nodes"].items():
        group = groups.get(node["group"], {})
        policy = group.get("ipolicy") or data["ipolicy"]
        out[name] = NodeState(
            name=name,
            group=node["group"],
            rank=POLICY_RANK.get(group.get("alloc_policy", "preferred"), len(POLICY_RANK)),
            usable=_unusable(node, group),
            total_memory=int(node.get("total_memory", 0)),
            free_memory=int(node.get("free_memory", 0)),
            total_disk=int(node.get("total_disk", 0)),
            free_disk=int(node.get("free_disk", 0)),
            cpu_limit=float(node.get("total_cpus", 0)) * float(policy[IP.IPOLICY_VCPU_RATIO]),
            used_vcpus=used.get(name, 0),
            # Ganeti's names (drbd) as Corral's (mirrored): a request names Corral's.
            templates=[N.canonical_template(t) for t in policy.get("disk-templates", [])],
        )
    return out


def _unusable(node: dict[str, Any], group: dict[str, Any]) -> str | None:
    if node.get("offline"):
        return "offline or unreachable"
    if node.get("drained"):
        return "drained"
    if not node.get("vm_capable", True):
        return "not vm-capable"
    if group.get("alloc_policy") not in POLICY_RANK:
        return f"group {group.get('name', node['group'])} is unallocable"
    if "free_memory" not in node:
        return "no resource data"
    return None


def best_node(
    nodes: dict[str, NodeState], spec: Spec, allowed: Callable[[NodeState], str | None]
) -> tuple[NodeState | None, dict[str, str]]:
    """The best node for ``spec`` among those ``allowed`` (None: allowed), and
    why each other node was refused."""
    refused: dict[str, str] = {}
    fitting = []
    for node in nodes.values():
        reason = allowed(node) or node.refusal(spec)
        if reason is None:
            fitting.append(node)
        else:
            refused[node.name] = reason
    if not fitting:
        return None, refused
    fitting.sort(key=lambda n: (n.rank, -n.score(spec), n.name))
    return fitting[0], refused


def describe_refusals(refused: dict[str, str]) -> str:
    """One line naming why nodes were refused (the first few, by name)."""
    if not refused:
        return "the cluster has no nodes"
    names = sorted(refused)
    parts = [f"{name}: {refused[name]}" for name in names[:_SHOWN_REASONS]]
    if len(names) > _SHOWN_REASONS:
        parts.append(f"and {len(names) - _SHOWN_REASONS} more")
    return "; ".join(parts)
