"""The "node" and "group" resources: the configuration, and for the node's
live fields (:mod:`corral.master.resources.node_live`) what the nodes report.

Parameters are shown filled as luxid shows them: a node's node parameters
over its group's over the cluster's (over Ganeti's defaults, see
:mod:`corral.master.resources.params`), a group's instance policy over the
cluster's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral.diskparams import DISK_DT_DEFAULTS
from corral.ipolicy import group_ipolicy
from corral.master.resources import node_live
from corral.master.resources.common import Names, object_fields, param_fields
from corral.master.resources.params import ND_TITLES
from corral.nicesort import nice_sort
from corral.objects import Cluster, Node, NodeGroup
from corral.query.fields import NODATA, UNAVAIL, Field, FieldSet
from corral.services.ndparams import ND_TYPES, group_ndparams, node_ndparams

if TYPE_CHECKING:
    from corral.services.context import Master

# The need of the fields that list a node's instances.
INSTANCES = "instances"


@dataclass
class NodeContext:
    """What every row of one query shares."""

    cluster: Cluster
    groups: dict[str, NodeGroup]  # uuid → group
    # node uuid → names of its primary and secondary instances (with the need).
    primaries: dict[str, list[str]] = field(default_factory=dict)
    secondaries: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class NodeRow:
    obj: Node
    ctx: NodeContext
    # call name → its answer (None: failed); see node_live.gather
    live: dict[str, Any] = field(default_factory=dict)

    @property
    def group(self) -> NodeGroup | None:
        """The node's group (None if the configuration lacks it)."""
        return self.ctx.groups.get(self.obj.group)

    def ndparams(self) -> dict[str, Any] | None:
        """The filled node parameters (None if the node's group is missing)."""
        group = self.group
        return None if group is None else node_ndparams(self.ctx.cluster, group, self.obj)


def _role(row: NodeRow) -> str:
    """M(aster), C(andidate), D(rained), O(ffline) or R(egular), first that applies."""
    node = row.obj
    if node.uuid == row.ctx.cluster.master_node:
        return "M"
    if node.master_candidate:
        return "C"
    if node.drained:
        return "D"
    return "O" if node.offline else "R"


ROLE_DOC = (
    'Node role; "M" for master, "C" for master candidate, "R" for regular,'
    ' "D" for drained, "O" for offline'
)


def _powered(row: NodeRow) -> Any:
    """Whether the node is powered on, known only with an out-of-band program
    (as that program last left it)."""
    params = row.ndparams()
    if params is None:
        return NODATA
    return row.obj.powered if params["oob_program"] else UNAVAIL


def _group_name(row: NodeRow) -> Any:
    group = row.group
    return NODATA if group is None else group.name


def _flag_fields() -> list[Field]:
    """Addresses and flags."""
    return [
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
        Field(
            "master",
            "IsMaster",
            C.QFT_BOOL,
            "Whether node is master",
            lambda r: r.obj.uuid == r.ctx.cluster.master_node,
        ),
        Field("role", "Role", C.QFT_TEXT, ROLE_DOC, _role),
        Field("group", "Group", C.QFT_TEXT, "Node group", _group_name),
        Field("group.uuid", "GroupUUID", C.QFT_TEXT, "UUID of node group", lambda r: r.obj.group),
        Field(
            "powered",
            "Powered",
            C.QFT_BOOL,
            "Whether node is thought to be powered on",
            _powered,
        ),
    ]


def _instance_fields() -> list[Field]:
    """The node's instances."""
    need = (INSTANCES,)
    return [
        Field(
            "pinst_cnt",
            "Pinst",
            C.QFT_NUMBER,
            "Number of instances with this node as primary",
            lambda r: len(r.ctx.primaries.get(r.obj.uuid, ())),
            need,
        ),
        Field(
            "pinst_list",
            "PriInstances",
            C.QFT_OTHER,
            "List of instances with this node as primary",
            lambda r: nice_sort(r.ctx.primaries.get(r.obj.uuid, [])),
            need,
        ),
        Field(
            "sinst_cnt",
            "Sinst",
            C.QFT_NUMBER,
            "Number of instances with this node as secondary",
            lambda r: len(r.ctx.secondaries.get(r.obj.uuid, ())),
            need,
        ),
        Field(
            "sinst_list",
            "SecInstances",
            C.QFT_OTHER,
            "List of instances with this node as secondary",
            lambda r: nice_sort(r.ctx.secondaries.get(r.obj.uuid, [])),
            need,
        ),
    ]


def _param_fields() -> list[Field]:
    """Node parameters, and the resource model Corral (like Ganeti) does not fill."""
    return [
        Field(
            "ndparams",
            "NodeParameters",
            C.QFT_OTHER,
            "Merged node parameters",
            lambda r: _or_nodata(r.ndparams()),
        ),
        Field(
            "custom_ndparams",
            "CustomNodeParameters",
            C.QFT_OTHER,
            "Custom node parameters",
            lambda r: r.obj.ndparams,
        ),
        *param_fields("ndp", "node", ND_TYPES, ND_TITLES, lambda r: r.ndparams() or {}),
        # Declared by luxid for parity with the node resource model, which has
        # never been filled: always unavailable.
        Field("hv_state", "HypervisorState", C.QFT_OTHER, "Hypervisor state", _unavailable),
        Field("disk_state", "DiskState", C.QFT_OTHER, "Disk state", _unavailable),
    ]


def _or_nodata(value: Any) -> Any:
    return NODATA if value is None else value


def _unavailable(row: Any) -> Any:
    return UNAVAIL


NODE_FIELDS = FieldSet(
    [
        *_flag_fields(),
        *_instance_fields(),
        *_param_fields(),
        *node_live.live_fields(),
        *object_fields("Node"),
    ]
)


async def node_items(master: Master, needs: set[str], names: Names) -> list[NodeRow]:
    """Every node (or those of ``names``); their instances and live data only
    when ``needs`` asks."""
    cfg = master.cfg
    ctx = NodeContext(cfg.cluster, {g.uuid: g for g in cfg.groups()})
    if INSTANCES in needs:
        for inst in cfg.instances():
            ctx.primaries.setdefault(inst.primary_node, []).append(inst.name)
            for node in inst.secondary_nodes:
                ctx.secondaries.setdefault(node, []).append(inst.name)
    nodes = cfg.nodes()
    if names is not None:
        nodes = [n for n in nodes if n.name in names]
    live = await node_live.gather(master, nodes, needs)
    return [NodeRow(n, ctx, live.get(n.uuid, {})) for n in nodes]


@dataclass
class GroupRow:
    obj: NodeGroup
    cluster: Cluster
    members: list[str]
    instances: list[str]


def _group_diskparams(row: GroupRow) -> dict[str, Any]:
    """The group's disk parameters over the cluster's, disk template by template."""
    own = row.obj.diskparams
    return {dt: {**defaults, **own.get(dt, {})} for dt, defaults in DISK_DT_DEFAULTS.items()}


def _group_param_fields() -> list[Field]:
    """Node parameters, disk parameters and instance policy, filled and custom."""
    return [
        Field(
            "ndparams",
            "NDParams",
            C.QFT_OTHER,
            "Node parameters",
            lambda r: group_ndparams(r.cluster, r.obj),
        ),
        Field(
            "custom_ndparams",
            "CustomNDParams",
            C.QFT_OTHER,
            "Custom node parameters",
            lambda r: r.obj.ndparams,
        ),
        *param_fields(
            "ndp", "node", ND_TYPES, ND_TITLES, lambda r: group_ndparams(r.cluster, r.obj)
        ),
        Field(
            "diskparams",
            "DiskParameters",
            C.QFT_OTHER,
            "Disk parameters (merged)",
            _group_diskparams,
        ),
        Field(
            "custom_diskparams",
            "CustomDiskParameters",
            C.QFT_OTHER,
            "Custom disk parameters",
            lambda r: r.obj.diskparams,
        ),
        Field(
            "ipolicy",
            "InstancePolicy",
            C.QFT_OTHER,
            "Instance policy limitations (merged)",
            lambda r: group_ipolicy(r.cluster.ipolicy, r.obj.ipolicy),
        ),
        Field(
            "custom_ipolicy",
            "CustomInstancePolicy",
            C.QFT_OTHER,
            "Custom instance policy limitations",
            lambda r: r.obj.ipolicy,
        ),
    ]


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
        *_group_param_fields(),
        *object_fields("Group"),
    ]
)


async def group_items(master: Master, needs: set[str], names: Names) -> list[GroupRow]:
    """Every node group with its nodes and primary instances."""
    cfg = master.cfg
    node_group = {n.uuid: n.group for n in cfg.nodes()}
    members: dict[str, list[str]] = {}
    for node in cfg.nodes():
        members.setdefault(node.group, []).append(node.name)
    instances: dict[str, list[str]] = {}
    for inst in cfg.instances():
        group = node_group.get(inst.primary_node)
        if group is not None:
            instances.setdefault(group, []).append(inst.name)
    return [
        GroupRow(
            group,
            cfg.cluster,
            sorted(members.get(group.uuid, [])),
            nice_sort(instances.get(group.uuid, [])),
        )
        for group in cfg.groups()
    ]
