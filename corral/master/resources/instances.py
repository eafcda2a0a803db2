"""The "instance" resource: configuration plus live state from the nodes.

The fields are luxid's (their names, titles, kinds, descriptions, and what
a missing value's status is); disk and NIC fields are in
:mod:`corral.master.resources.instance_devices`.  Only the state fields
(``status``, ``oper_*``, ``console``) need the nodes: one call per primary node
and hypervisor in use, and for ``console`` one more per node running instances.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import hvparams as HV
from corral import hypervisors
from corral import params as P
from corral import paramtypes as PT
from corral.master.resources.common import (
    Names,
    alias_fields,
    forthcoming_field,
    object_fields,
    param_fields,
)
from corral.master.resources.instance_devices import disk_fields, nic_fields
from corral.master.resources.params import BE_TITLES, HV_TITLES
from corral.objects import ADMIN_OFFLINE, ADMIN_UP, Cluster, Instance, Node
from corral.query.fields import NODATA, OFFLINE, UNAVAIL, Field, FieldSet
from corral.services.console import instance_consoles
from corral.services.params import filled_beparams, filled_hvparams
from corral.services.running import Target, named_instances, running_instances

if TYPE_CHECKING:
    from corral.rpc.result import RpcResult
    from corral.rpc.wire import JsonObject
    from corral.services.context import Master

LIVE = "live"
CONSOLE = "console"  # the consoles of the running instances, asked of their nodes
NODE_OK, NODE_OFFLINE, NODE_DOWN = "ok", "offline", "down"

# Hypervisor parameters that only the cluster has: an instance's leave them out.
HV_GLOBALS = frozenset({"migration_bandwidth", "migration_mode", "migration_port", "xen_cmd"})

# The statuses in the order the status field's description explains them.
_STATUS_DOCS = (
    ("running", "if instance is set to be running and actually is"),
    ("ADMIN_down", "if instance is stopped and is not running"),
    ("ERROR_wrongnode", "if instance running, but not on its designated primary node"),
    ("ERROR_up", "if instance should be stopped, but is actually running"),
    ("ERROR_down", "if instance should run, but doesn't"),
    ("ERROR_nodedown", "if instance's primary node is down"),
    ("ERROR_nodeoffline", "if instance's primary node is marked offline"),
    ("ADMIN_offline", "if instance is offline and does not use dynamic resources"),
)
STATUS_DOC = "Instance status; " + ", ".join(f'"{s}" {why}' for s, why in _STATUS_DOCS)

# Shorter names luxid also accepts, each with the definition of the field it stands for.
ALIASES = (
    ("vcpus", "be/vcpus"),
    ("be/memory", "be/maxmem"),
    ("sda_size", "disk.size/0"),
    ("sdb_size", "disk.size/1"),
    ("ip", "nic.ip/0"),
    ("mac", "nic.mac/0"),
    ("bridge", "nic.bridge/0"),
    ("nic_mode", "nic.mode/0"),
    ("nic_link", "nic.link/0"),
    ("nic_network", "nic.network/0"),
)


@dataclass
class InstanceContext:
    """What every row of one query shares: the cluster and who is where."""

    cluster: Cluster
    node_names: dict[str, str]  # node uuid → name
    node_groups: dict[str, str]  # node uuid → group uuid
    group_names: dict[str, str]  # group uuid → name
    network_names: dict[str, str]  # network uuid → name

    def group_of(self, node: str) -> str | None:
        """The uuid of an existing node's group (None if either is missing)."""
        group = self.node_groups.get(node)
        return group if group in self.group_names else None


@dataclass
class InstanceRow:
    obj: Instance
    ctx: InstanceContext
    node_state: str = NODE_OK
    live: Mapping[str, Any] | None = None
    console: RpcResult[JsonObject] | None = None


def status(row: InstanceRow) -> str:
    """Ganeti's instance status from the admin state and what the node reports."""
    inst = row.obj
    if row.node_state == NODE_OFFLINE:
        return "ERROR_nodeoffline"
    if row.node_state == NODE_DOWN:
        return "ERROR_nodedown"
    if inst.admin_state == ADMIN_OFFLINE:
        return "ADMIN_offline"
    if row.live is not None and row.live.get("state") == C.HV_STATE_SHUTDOWN:
        # Stopped from inside the guest; the node keeps it until it is cleaned up.
        if inst.admin_state != ADMIN_UP:
            return "ADMIN_down"
        return "USER_down" if _user_down_allowed(row) else "ERROR_down"
    if row.live is not None:
        return "running" if inst.admin_state == ADMIN_UP else "ERROR_up"
    if inst.admin_state == ADMIN_UP:
        return "ERROR_down"
    return "USER_down" if inst.admin_state_source == "user" else "ADMIN_down"


def _user_down_allowed(row: InstanceRow) -> bool:
    """Ganeti's rule: the cluster allows user shutdown and, for kvm, so does
    the instance's ``user_shutdown`` parameter (the hypervisor table names it)."""
    inst, cluster = row.obj, row.ctx.cluster
    if not cluster.enabled_user_shutdown:
        return False
    kind = hypervisors.kind(inst.hypervisor)
    param = None if kind is None else kind.user_shutdown_param
    return param is None or bool(filled_hvparams(cluster, inst).get(param))


def _live(key: str) -> Any:
    def getter(row: InstanceRow) -> Any:
        if row.node_state == NODE_OFFLINE:
            return OFFLINE
        if row.node_state == NODE_DOWN:
            return NODATA
        return row.live[key] if row.live is not None else UNAVAIL

    return getter


def _console(row: InstanceRow) -> Any:
    """How to reach the console, as the primary node's hypervisor tells it."""
    if row.node_state == NODE_OFFLINE:
        return OFFLINE
    if row.node_state == NODE_DOWN:
        return NODATA
    if row.live is None:
        return UNAVAIL  # not running: no console (Ganeti's query leaves it so)
    console = row.console.value if row.console is not None else None
    return NODATA if console is None else console


def _pnode_group(row: InstanceRow) -> Any:
    return _or_nodata(row.ctx.group_of(row.obj.primary_node))


def _pnode_group_name(row: InstanceRow) -> Any:
    group = row.ctx.group_of(row.obj.primary_node)
    return NODATA if group is None else row.ctx.group_names[group]


def _snodes_groups(row: InstanceRow) -> list[str]:
    """The groups of the secondary nodes that have one."""
    groups = (row.ctx.group_of(node) for node in row.obj.secondary_nodes)
    return [group for group in groups if group is not None]


def _or_nodata(value: Any) -> Any:
    return NODATA if value is None else value


def _config_fields() -> list[Field]:
    """Name, OS, nodes, desired state, hypervisor."""
    return [
        Field("name", "Instance", C.QFT_TEXT, "Instance name", lambda r: r.obj.name),
        Field("os", "OS", C.QFT_TEXT, "Operating system", lambda r: r.obj.os),
        Field(
            "hypervisor", "Hypervisor", C.QFT_TEXT, "Hypervisor name", lambda r: r.obj.hypervisor
        ),
        Field(
            "admin_state",
            "InstanceState",
            C.QFT_TEXT,
            "Desired state of instance",
            lambda r: r.obj.admin_state,
        ),
        Field(
            "admin_state_source",
            "InstanceStateSource",
            C.QFT_TEXT,
            "Who last changed the desired state of the instance",
            lambda r: r.obj.admin_state_source,
        ),
        Field(
            "admin_up",
            "Autostart",
            C.QFT_BOOL,
            "Desired state of instance",
            lambda r: r.obj.admin_state == ADMIN_UP,
        ),
        Field(
            "disks_active",
            "DisksActive",
            C.QFT_BOOL,
            "Desired state of instance disks",
            lambda r: r.obj.disks_active,
        ),
        Field(
            "network_port",
            "Network_port",
            C.QFT_OTHER,
            "Instance network port if available (e.g. for VNC console)",
            lambda r: UNAVAIL if r.obj.network_port is None else r.obj.network_port,
        ),
    ]


def _node_fields() -> list[Field]:
    """The primary and secondary nodes and their groups."""
    return [
        Field(
            "pnode",
            "Primary_node",
            C.QFT_TEXT,
            "Primary node",
            lambda r: r.ctx.node_names.get(r.obj.primary_node, NODATA),
        ),
        Field(
            "pnode.group",
            "PrimaryNodeGroup",
            C.QFT_TEXT,
            "Primary node's group",
            _pnode_group_name,
        ),
        Field(
            "pnode.group.uuid",
            "PrimaryNodeGroupUUID",
            C.QFT_TEXT,
            "Primary node's group UUID",
            _pnode_group,
        ),
        Field(
            "snodes",
            "Secondary_Nodes",
            C.QFT_OTHER,
            "Secondary nodes; usually this will just be one node",
            lambda r: [r.ctx.node_names.get(s, s) for s in r.obj.secondary_nodes],
        ),
        Field(
            "snodes.group",
            "SecondaryNodesGroups",
            C.QFT_OTHER,
            "Node groups of secondary nodes",
            lambda r: [r.ctx.group_names[g] for g in _snodes_groups(r)],
        ),
        Field(
            "snodes.group.uuid",
            "SecondaryNodesGroupsUUID",
            C.QFT_OTHER,
            "Node group UUIDs of secondary nodes",
            _snodes_groups,
        ),
    ]


def _state_fields() -> list[Field]:
    """What the hypervisor reports (these need the nodes)."""
    live = (LIVE,)
    return [
        Field("status", "Status", C.QFT_TEXT, STATUS_DOC, status, live),
        Field(
            "oper_state",
            "Running",
            C.QFT_BOOL,
            "Actual state of instance",
            lambda r: NODATA if r.node_state != NODE_OK else r.live is not None,
            live,
        ),
        Field(
            "oper_ram",
            "Memory",
            C.QFT_UNIT,
            "Actual memory usage as seen by hypervisor",
            _live("memory"),
            live,
        ),
        Field(
            "oper_vcpus",
            "VCPUs",
            C.QFT_NUMBER,
            "Actual number of VCPUs as seen by hypervisor",
            _live("vcpus"),
            live,
        ),
        Field(
            "console",
            "Console",
            C.QFT_OTHER,
            "Instance console information",
            _console,
            (LIVE, CONSOLE),
        ),
    ]


def _hvparams(row: InstanceRow) -> dict[str, Any]:
    filled = filled_hvparams(row.ctx.cluster, row.obj)
    return {key: value for key, value in filled.items() if key not in HV_GLOBALS}


def _osparams(row: InstanceRow) -> dict[str, Any]:
    """The instance's OS parameters over the cluster's for the OS (without its
    variant); private parameters are not shown."""
    cluster_params = row.ctx.cluster.osparams.get(row.obj.os.partition("+")[0])
    if cluster_params is None:
        return row.obj.osparams
    return {**cluster_params, **row.obj.osparams}


def _param_fields() -> list[Field]:
    """Backend, hypervisor and OS parameters."""
    return [
        Field(
            "beparams",
            "BackendParameters",
            C.QFT_OTHER,
            "Backend parameters (merged)",
            lambda r: filled_beparams(r.ctx.cluster, r.obj),
        ),
        Field(
            "hvparams",
            "HypervisorParameters",
            C.QFT_OTHER,
            "Hypervisor parameters (merged)",
            _hvparams,
        ),
        Field(
            "osparams",
            "OpSysParameters",
            C.QFT_OTHER,
            "Operating system parameters (merged)",
            _osparams,
        ),
        Field(
            "custom_beparams",
            "CustomBackendParameters",
            C.QFT_OTHER,
            "Custom backend parameters",
            lambda r: r.obj.beparams,
        ),
        Field(
            "custom_hvparams",
            "CustomHypervisorParameters",
            C.QFT_OTHER,
            "Custom hypervisor parameters",
            lambda r: r.obj.hvparams,
        ),
        Field(
            "custom_osparams",
            "CustomOpSysParameters",
            C.QFT_OTHER,
            "Custom operating system parameters",
            lambda r: r.obj.osparams,
        ),
        *param_fields(
            "be",
            "backend",
            P.BE_TYPES,
            BE_TITLES,
            lambda r: filled_beparams(r.ctx.cluster, r.obj),
        ),
        # As luxid: a field for every parameter of every hypervisor (Ganeti's
        # whole table, not only the hypervisors Corral runs) but the
        # cluster-wide ones; one the instance's hypervisor lacks is unavailable.
        # Corral's own parameters have none: the field list stays Ganeti's
        # (its QA compares it); they show in hvparams and gnt-instance info.
        *param_fields(
            "hv",
            "hypervisor",
            {
                k: v
                for k, v in PT.HV_PARAMETER_TYPES.items()
                if k not in HV_GLOBALS and k not in HV.EXTENSIONS
            },
            HV_TITLES,
            _hvparams,
            UNAVAIL,
        ),
    ]


def _fields() -> list[Field]:
    fields = [
        *_config_fields(),
        *_node_fields(),
        *_state_fields(),
        *_param_fields(),
        *nic_fields(),
        *disk_fields(),
        *object_fields("Instance"),
        forthcoming_field("Instance"),
    ]
    return alias_fields(fields, ALIASES)


FIELDS = FieldSet(_fields())


async def items(master: Master, needs: set[str], names: Names) -> list[InstanceRow]:
    """Every instance (or those of ``names``); with the ``live`` need, what its
    primary node reports."""
    cfg = master.cfg
    nodes = cfg.nodes()
    ctx = InstanceContext(
        cfg.cluster,
        {n.uuid: n.name for n in nodes},
        {n.uuid: n.group for n in nodes},
        {g.uuid: g.name for g in cfg.groups()},
        {n.uuid: n.name for n in cfg.networks()},
    )
    if names is None:
        instances = cfg.instances()
    else:
        found = (cfg.find(Instance, name) for name in sorted(names))
        instances = [inst for inst in found if inst is not None]
    rows = [InstanceRow(inst, ctx) for inst in instances]
    if LIVE in needs and rows:
        await _add_live_data(master, rows, named=names is not None)
    if CONSOLE in needs:
        running = [row for row in rows if row.live is not None]
        consoles = await instance_consoles(master, [row.obj for row in running])
        for row in running:
            row.console = consoles[row.obj.uuid]
    return rows


async def _add_live_data(master: Master, rows: list[InstanceRow], *, named: bool) -> None:
    """Ask each primary node which instances of each hypervisor in use run there
    (``named``: which of these rows' instances): a failure leaves unknown only
    the instances of that node and hypervisor."""
    by_primary: dict[str, list[InstanceRow]] = {}
    for row in rows:
        by_primary.setdefault(row.obj.primary_node, []).append(row)
    by_target: dict[Target, list[InstanceRow]] = {}
    for uuid, node_rows in by_primary.items():
        node = master.cfg.get(Node, uuid)
        if node is None or node.offline:
            for row in node_rows:
                row.node_state = NODE_OFFLINE
            continue
        for row in node_rows:
            by_target.setdefault((uuid, node.primary_ip, row.obj.hypervisor), []).append(row)
    if not by_target:
        return
    if named:
        wanted = {target: [r.obj.name for r in rs] for target, rs in by_target.items()}
        results = await named_instances(master, wanted)
    else:
        results = await running_instances(master, by_target)
    for (uuid, _, hypervisor), target_rows in by_target.items():
        res = results.get((uuid, hypervisor))
        running = res.value if res is not None else None
        if running is None:
            for row in target_rows:
                row.node_state = NODE_DOWN
            continue
        for row in target_rows:
            row.live = running.get(row.obj.name)
