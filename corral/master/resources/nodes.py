"""The "node" and "group" resources (from the configuration)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from corral import constants as C
from corral.master.resources.common import object_fields
from corral.objects import Node, NodeGroup
from corral.query.fields import Field, FieldSet

if TYPE_CHECKING:
    from corral.cmdlib.base import Master


@dataclass
class NodeRow:
    obj: Node
    is_master: bool
    group_name: str
    pinst: list[str]
    sinst: list[str]


def _role(row: NodeRow) -> str:
    node = row.obj
    if row.is_master:
        return "M"
    if node.offline:
        return "O"
    if node.drained:
        return "D"
    return "C" if node.master_candidate else "R"


NODE_FIELDS = FieldSet(
    [
        Field("name", "Node", C.QFT_TEXT, "Node name", lambda r: r.obj.name),
        Field("pip", "PrimaryIP", C.QFT_TEXT, "Primary IP address", lambda r: r.obj.primary_ip),
        Field(
            "sip", "SecondaryIP", C.QFT_TEXT, "Secondary IP address", lambda r: r.obj.secondary_ip
        ),
        Field(
            "master_candidate",
            "MasterC",
            C.QFT_BOOL,
            "Whether node is a master candidate",
            lambda r: r.obj.master_candidate,
        ),
        Field(
            "offline",
            "Offline",
            C.QFT_BOOL,
            "Whether node is marked offline",
            lambda r: r.obj.offline,
        ),
        Field("drained", "Drained", C.QFT_BOOL, "Whether node is drained", lambda r: r.obj.drained),
        Field(
            "master_capable",
            "MasterCapable",
            C.QFT_BOOL,
            "Whether node can become a master candidate",
            lambda r: r.obj.master_capable,
        ),
        Field(
            "vm_capable",
            "VMCapable",
            C.QFT_BOOL,
            "Whether node can host instances",
            lambda r: r.obj.vm_capable,
        ),
        Field("master", "IsMaster", C.QFT_BOOL, "Whether node is master", lambda r: r.is_master),
        Field("role", "Role", C.QFT_TEXT, "Node role (M, C, R, D, O)", _role),
        Field("group", "Group", C.QFT_TEXT, "Node group", lambda r: r.group_name),
        Field("group.uuid", "GroupUUID", C.QFT_TEXT, "UUID of node group", lambda r: r.obj.group),
        Field(
            "pinst_cnt",
            "Pinst",
            C.QFT_NUMBER,
            "Number of instances with this node as primary",
            lambda r: len(r.pinst),
        ),
        Field(
            "pinst_list",
            "PriInstances",
            C.QFT_OTHER,
            "List of instances with this node as primary",
            lambda r: r.pinst,
        ),
        Field(
            "sinst_cnt",
            "Sinst",
            C.QFT_NUMBER,
            "Number of instances with this node as secondary",
            lambda r: len(r.sinst),
        ),
        Field(
            "sinst_list",
            "SecInstances",
            C.QFT_OTHER,
            "List of instances with this node as secondary",
            lambda r: r.sinst,
        ),
        *object_fields(),
    ]
)


async def node_items(master: Master, needs: set[str]) -> list[NodeRow]:
    cfg = master.cfg
    groups = {g.uuid: g.name for g in cfg.groups()}
    primaries: dict[str, list[str]] = {}
    secondaries: dict[str, list[str]] = {}
    for inst in sorted(cfg.instances(), key=lambda i: i.name):
        primaries.setdefault(inst.primary_node, []).append(inst.name)
        for node in inst.secondary_nodes:
            secondaries.setdefault(node, []).append(inst.name)
    return [
        NodeRow(
            n,
            n.uuid == cfg.cluster.master_node,
            groups.get(n.group, n.group),
            primaries.get(n.uuid, []),
            secondaries.get(n.uuid, []),
        )
        for n in cfg.nodes()
    ]


@dataclass
class GroupRow:
    obj: NodeGroup
    members: list[str]
    instances: list[str]


GROUP_FIELDS = FieldSet(
    [
        Field("name", "Group", C.QFT_TEXT, "Group name", lambda r: r.obj.name),
        Field(
            "alloc_policy",
            "AllocPolicy",
            C.QFT_TEXT,
            "Allocation policy for group",
            lambda r: r.obj.alloc_policy,
        ),
        Field("node_cnt", "Nodes", C.QFT_NUMBER, "Number of nodes", lambda r: len(r.members)),
        Field("node_list", "NodeList", C.QFT_OTHER, "List of nodes", lambda r: r.members),
        Field("ndparams", "NDParams", C.QFT_OTHER, "Node parameters", lambda r: r.obj.ndparams),
        Field(
            "pinst_cnt",
            "Instances",
            C.QFT_NUMBER,
            "Number of primary instances",
            lambda r: len(r.instances),
        ),
        Field(
            "pinst_list",
            "InstanceList",
            C.QFT_OTHER,
            "List of primary instances",
            lambda r: r.instances,
        ),
        *object_fields(),
    ]
)


async def group_items(master: Master, needs: set[str]) -> list[GroupRow]:
    cfg = master.cfg
    node_group = {n.uuid: n.group for n in cfg.nodes()}
    rows = []
    for group in cfg.groups():
        members = sorted(n.name for n in cfg.nodes() if n.group == group.uuid)
        instances = sorted(
            i.name for i in cfg.instances() if node_group.get(i.primary_node) == group.uuid
        )
        rows.append(GroupRow(group, members, instances))
    return rows
