"""The ExtStorage providers of all nodes, gathered and combined per provider
(Ganeti's ExtStorageQuery).

The online vm_capable nodes are asked.  A provider's status on a node is its
first directory in the node's search path; a node that has no such directory
has it missing.  A node group is valid for a provider unless one of its nodes
that answered has it invalid or missing (so a node whose call failed makes no
provider invalid, and a group without such nodes is valid).  The parameters
are those every node where the provider is valid declares.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from corral.nicesort import nice_sort
from corral.objects import Node, NodeGroup
from corral.rpc.calls_storage import extstorage_diagnose
from corral.rpc.wire import ExtStorageWire

if TYPE_CHECKING:
    from corral.services.context import Master

# One directory of a provider on a node: [path, valid, diagnose, parameters].
NodeEntry = list[Any]


@dataclass
class ProviderRow:
    """One provider as OP_EXT_STORAGE_DIAGNOSE reports it."""

    name: str
    # node name → the provider's directories on it, first one used (empty: missing)
    node_status: dict[str, list[NodeEntry]]
    # group name → whether the provider is valid on all its nodes that answered
    nodegroup_status: dict[str, bool]
    # [name, description] of the parameters all nodes where it is valid share
    parameters: list[list[str]]


def _valid(entries: list[NodeEntry]) -> bool:
    return bool(entries) and bool(entries[0][1])


def _common_parameters(node_status: Mapping[str, list[NodeEntry]]) -> list[list[str]]:
    """The parameters declared alike by every node where the provider is valid,
    in the order of the first such node."""
    declared = [
        [tuple(p) for p in entries[0][3]] for entries in node_status.values() if _valid(entries)
    ]
    if not declared:
        return []
    shared = set(declared[0]).intersection(*declared[1:])
    return [list(p) for p in dict.fromkeys(declared[0]) if p in shared]


def _group_status(
    node_status: Mapping[str, list[NodeEntry]], groups: Sequence[NodeGroup], nodes: Sequence[Node]
) -> dict[str, bool]:
    status = {}
    for group in groups:
        members = [n.name for n in nodes if n.group == group.uuid and n.name in node_status]
        status[group.name] = all(_valid(node_status[name]) for name in members)
    return status


def combine(
    answers: Mapping[str, list[ExtStorageWire] | None],
    nodes: Sequence[Node],
    groups: Sequence[NodeGroup],
) -> list[ProviderRow]:
    """The rows of every provider some node has (nice-sorted by name), from
    ``answers`` (node name → its extstorage_diagnose answer, None if it failed)."""
    answered = {node: found for node, found in answers.items() if found is not None}
    per_provider: dict[str, dict[str, list[NodeEntry]]] = {}
    for node, found in answered.items():
        for entry in found:
            statuses = per_provider.setdefault(entry["name"], {n: [] for n in answered})
            statuses[node].append(
                [entry["path"], entry["valid"], entry["diagnose"], entry["parameters"]]
            )
    return [
        ProviderRow(
            name,
            per_provider[name],
            _group_status(per_provider[name], groups, nodes),
            _common_parameters(per_provider[name]),
        )
        for name in nice_sort(per_provider)
    ]


async def provider_rows(master: Master) -> list[ProviderRow]:
    """Ask the online vm_capable nodes for their providers and combine the answers."""
    nodes = [n for n in master.cfg.nodes() if not n.offline and n.vm_capable]
    results = await master.rpc.results(nodes, extstorage_diagnose())
    answers = {n.name: results[n.uuid].value for n in nodes}
    return combine(answers, master.cfg.nodes(), master.cfg.groups())
