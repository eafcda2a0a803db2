"""The "instance" resource: configuration plus live state from the nodes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral.cmdlib.instance_utils import filled_beparams, filled_hvparams, filled_nicparams
from corral.master.resources.common import object_fields
from corral.objects import ADMIN_OFFLINE, ADMIN_UP, Cluster, Instance, Node
from corral.query.fields import NODATA, OFFLINE, UNAVAIL, Field, FieldSet

if TYPE_CHECKING:
    from corral.cmdlib.base import Master

LIVE = "live"
NODE_OK, NODE_OFFLINE, NODE_DOWN = "ok", "offline", "down"


@dataclass
class InstanceRow:
    obj: Instance
    cluster: Cluster
    pnode: str
    snodes: list[str]
    node_state: str = NODE_OK
    live: dict[str, Any] | None = None


def status(row: InstanceRow) -> str:
    """Ganeti's instance status from the admin state and what the node reports."""
    inst = row.obj
    if row.node_state == NODE_OFFLINE:
        return "ERROR_nodeoffline"
    if row.node_state == NODE_DOWN:
        return "ERROR_nodedown"
    if inst.admin_state == ADMIN_OFFLINE:
        return "ADMIN_offline"
    if row.live is not None:
        return "running" if inst.admin_state == ADMIN_UP else "ERROR_up"
    if inst.admin_state == ADMIN_UP:
        return "ERROR_down"
    return "USER_down" if inst.admin_state_source == "user" else "ADMIN_down"


def _live(key: str) -> Any:
    def getter(row: InstanceRow) -> Any:
        if row.node_state == NODE_OFFLINE:
            return OFFLINE
        if row.node_state == NODE_DOWN:
            return NODATA
        return row.live[key] if row.live is not None else UNAVAIL

    return getter


def _be(key: str) -> Any:
    return lambda r: filled_beparams(r.cluster, r.obj)[key]


def _nics(fn: Any) -> Any:
    return lambda r: [fn(r, n) for n in r.obj.nics]


def _nicp(key: str) -> Any:
    return _nics(lambda r, n: filled_nicparams(r.cluster, n)[key])


def _config_fields() -> list[Field]:
    """Name, OS, nodes, desired state, hypervisor."""
    return [
        Field("name", "Instance", C.QFT_TEXT, "Instance name", lambda r: r.obj.name),
        Field("os", "OS", C.QFT_TEXT, "Operating system", lambda r: r.obj.os),
        Field("pnode", "Primary_node", C.QFT_TEXT, "Primary node", lambda r: r.pnode),
        Field("snodes", "Secondary_Nodes", C.QFT_OTHER, "Secondary nodes", lambda r: r.snodes),
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
            "Who last changed the desired state",
            lambda r: r.obj.admin_state_source,
        ),
        Field(
            "admin_up",
            "Autostart",
            C.QFT_BOOL,
            "Desired state of instance is up",
            lambda r: r.obj.admin_state == ADMIN_UP,
        ),
        Field(
            "disk_template",
            "Disk_template",
            C.QFT_TEXT,
            "Instance disk template",
            lambda r: r.obj.disk_template,
        ),
        Field(
            "hypervisor", "Hypervisor", C.QFT_TEXT, "Hypervisor name", lambda r: r.obj.hypervisor
        ),
        Field(
            "network_port",
            "Network_port",
            C.QFT_OTHER,
            "Instance network port",
            lambda r: r.obj.network_port,
        ),
    ]


def _state_fields() -> list[Field]:
    """What the hypervisor reports (these need the nodes)."""
    live = (LIVE,)
    return [
        Field("status", "Status", C.QFT_TEXT, "Instance status", status, live),
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
    ]


def _param_fields() -> list[Field]:
    """Backend, hypervisor and OS parameters."""
    return [
        Field(
            "beparams",
            "BackendParameters",
            C.QFT_OTHER,
            "Backend parameters (merged)",
            lambda r: filled_beparams(r.cluster, r.obj),
        ),
        Field(
            "hvparams",
            "HypervisorParameters",
            C.QFT_OTHER,
            "Hypervisor parameters (merged)",
            lambda r: filled_hvparams(r.cluster, r.obj),
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
            "CustomOsParameters",
            C.QFT_OTHER,
            "Custom OS parameters",
            lambda r: r.obj.osparams,
        ),
        Field("be/maxmem", "ConfigMaxMem", C.QFT_UNIT, "Maximum memory", _be("maxmem")),
        Field("be/minmem", "ConfigMinMem", C.QFT_UNIT, "Minimum memory", _be("minmem")),
        Field("be/memory", "ConfigMaxMem", C.QFT_UNIT, "Maximum memory", _be("maxmem")),
        Field("be/vcpus", "ConfigVCPUs", C.QFT_NUMBER, "Number of VCPUs", _be("vcpus")),
        Field("be/auto_balance", "Auto_balance", C.QFT_BOOL, "Auto balance", _be("auto_balance")),
        Field(
            "be/always_failover",
            "Always_failover",
            C.QFT_BOOL,
            "Always failover",
            _be("always_failover"),
        ),
        Field("be/spindle_use", "SpindleUse", C.QFT_NUMBER, "Spindle use", _be("spindle_use")),
    ]


def _nic_fields() -> list[Field]:
    """Network interfaces."""
    return [
        Field(
            "nic.count",
            "NICs",
            C.QFT_NUMBER,
            "Number of network interfaces",
            lambda r: len(r.obj.nics),
        ),
        Field(
            "nic.macs",
            "NIC_MACs",
            C.QFT_OTHER,
            "List containing each network interface's MAC address",
            _nics(lambda r, n: n.mac),
        ),
        Field(
            "nic.ips",
            "NIC_IPs",
            C.QFT_OTHER,
            "List containing each network interface's IP address",
            _nics(lambda r, n: n.ip),
        ),
        Field(
            "nic.names",
            "NIC_Names",
            C.QFT_OTHER,
            "List containing each network interface's name",
            _nics(lambda r, n: n.name),
        ),
        Field(
            "nic.uuids",
            "NIC_UUIDs",
            C.QFT_OTHER,
            "List containing each network interface's UUID",
            _nics(lambda r, n: n.uuid),
        ),
        Field(
            "nic.modes",
            "NIC_modes",
            C.QFT_OTHER,
            "List containing each network interface's mode",
            _nicp("mode"),
        ),
        Field(
            "nic.links",
            "NIC_links",
            C.QFT_OTHER,
            "List containing each network interface's link",
            _nicp("link"),
        ),
        Field(
            "nic.vlans",
            "NIC_VLANs",
            C.QFT_OTHER,
            "List containing each network interface's VLAN",
            _nicp("vlan"),
        ),
        Field(
            "nic.bridges",
            "NIC_bridges",
            C.QFT_OTHER,
            "List containing each network interface's bridge",
            _nics(
                lambda r, n: (
                    filled_nicparams(r.cluster, n)["link"]
                    if filled_nicparams(r.cluster, n)["mode"] == "bridged"
                    else None
                )
            ),
        ),
    ]


def _disk_fields() -> list[Field]:
    """Disks."""
    return [
        Field("disk.count", "Disks", C.QFT_NUMBER, "Number of disks", lambda r: len(r.obj.disks)),
        Field(
            "disk.sizes",
            "Disk_sizes",
            C.QFT_OTHER,
            "List of disk sizes",
            lambda r: [d.size for d in r.obj.disks],
        ),
        Field(
            "disk.names",
            "Disk_names",
            C.QFT_OTHER,
            "List of disk names",
            lambda r: [d.name for d in r.obj.disks],
        ),
        Field(
            "disk.uuids",
            "Disk_UUIDs",
            C.QFT_OTHER,
            "List of disk UUIDs",
            lambda r: [d.uuid for d in r.obj.disks],
        ),
        Field(
            "disk_usage",
            "DiskUsage",
            C.QFT_UNIT,
            "Total disk space used by instance on each of its nodes",
            lambda r: sum(d.size for d in r.obj.disks),
        ),
    ]


def _fields() -> list[Field]:
    return [
        *_config_fields(),
        *_state_fields(),
        *_param_fields(),
        *_nic_fields(),
        *_disk_fields(),
        *_indexed_fields(),
        *object_fields(),
    ]


def _indexed_fields() -> list[Field]:
    """nic.mac/N, nic.ip/N, disk.size/N ... for the first eight items."""
    out = []
    for idx in range(8):
        out += [
            Field(
                f"nic.mac/{idx}",
                f"NicMAC/{idx}",
                C.QFT_TEXT,
                f"MAC address of network interface {idx}",
                _nth(lambda r: r.obj.nics, idx, lambda n: n.mac),
            ),
            Field(
                f"nic.ip/{idx}",
                f"NicIP/{idx}",
                C.QFT_TEXT,
                f"IP address of network interface {idx}",
                _nth(lambda r: r.obj.nics, idx, lambda n: n.ip),
            ),
            Field(
                f"disk.size/{idx}",
                f"Disk/{idx}",
                C.QFT_UNIT,
                f"Disk size of disk {idx}",
                _nth(lambda r: r.obj.disks, idx, lambda d: d.size),
            ),
        ]
    return out


def _nth(items: Any, idx: int, get: Any) -> Any:
    def getter(row: InstanceRow) -> Any:
        seq = items(row)
        return get(seq[idx]) if idx < len(seq) else UNAVAIL

    return getter


FIELDS = FieldSet(_fields())


async def items(master: Master, needs: set[str]) -> list[InstanceRow]:
    cfg = master.cfg
    cluster = cfg.cluster
    names = {n.uuid: n.name for n in cfg.nodes()}
    rows = [
        InstanceRow(
            inst,
            cluster,
            names.get(inst.primary_node, inst.primary_node),
            [names.get(s, s) for s in inst.secondary_nodes],
        )
        for inst in cfg.instances()
    ]
    if LIVE in needs and rows:
        await _add_live_data(master, rows)
    return rows


async def _add_live_data(master: Master, rows: list[InstanceRow]) -> None:
    """Ask every primary node which instances run there (one call per node)."""
    cfg = master.cfg
    nodes = {row.obj.primary_node for row in rows}
    targets = []
    offline = set()
    for uuid in nodes:
        node = cfg.get(Node, uuid)
        if node is None or node.offline:
            offline.add(uuid)
        else:
            targets.append((uuid, node.primary_ip))
    hypervisors = cfg.cluster.enabled_hypervisors
    results = await master.rpc.call(targets, "all_instances_info", [hypervisors]) if targets else {}
    for row in rows:
        primary = row.obj.primary_node
        if primary in offline:
            row.node_state = NODE_OFFLINE
            continue
        res = results.get(primary)
        if res is None or res.fail_msg:
            row.node_state = NODE_DOWN
            continue
        row.live = res.payload.get(row.obj.name)
