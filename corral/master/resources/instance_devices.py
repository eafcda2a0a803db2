"""The instance resource's disk and network interface fields.

Each kind of device has fields over all its devices (``disk.sizes``,
``nic.macs``) and one field per device and property (``disk.size/0`` ...
``disk.size/15``, ``nic.mac/0`` ... ``nic.mac/7``), as luxid has them: a
device that does not exist, or a property it does not have (a NIC without an
IP), is unavailable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral.objects import NIC, Disk
from corral.query.fields import UNAVAIL, Field
from corral.services.params import filled_nicparams

if TYPE_CHECKING:
    from corral.master.resources.instances import InstanceRow

MAX_DISKS = 16
MAX_NICS = 8
NIC_MODE_BRIDGED = "bridged"
NIC_MODE_OVS = "openvswitch"

DiskGet = Callable[[Disk], Any]
NicGet = Callable[["InstanceRow", NIC], Any]


_ORDINAL_SUFFIXES = {1: "st", 2: "nd", 3: "rd"}


def ordinal(number: int) -> str:
    """1st, 2nd, 3rd, 4th ... 11th, 12th, 13th ... 21st."""
    if number % 100 in (11, 12, 13):
        return f"{number}th"
    return f"{number}{_ORDINAL_SUFFIXES.get(number % 10, 'th')}"


def _bridge(row: InstanceRow, nic: NIC) -> Any:
    """The link of a bridged NIC (other modes have no bridge)."""
    params = filled_nicparams(row.ctx.cluster, nic)
    return params["link"] if params["mode"] == NIC_MODE_BRIDGED else None


def _vlan(row: InstanceRow, nic: NIC) -> Any:
    """The VLAN of an Open vSwitch NIC (other modes have no VLAN)."""
    params = filled_nicparams(row.ctx.cluster, nic)
    return params["vlan"] if params["mode"] == NIC_MODE_OVS else None


def _nicparam(key: str) -> NicGet:
    return lambda row, nic: filled_nicparams(row.ctx.cluster, nic)[key]


# Disk properties: field name part, title part, kind, description part, value.
_DISK_PROPERTIES: tuple[tuple[str, str, str, str, DiskGet], ...] = (
    ("size", "Disk", C.QFT_UNIT, "Disk size of {} disk", lambda d: d.size),
    ("spindles", "DiskSpindles", C.QFT_NUMBER, "Spindles of {} disk", lambda d: d.spindles),
    ("name", "DiskName", C.QFT_TEXT, "Name of {} disk", lambda d: d.name),
    ("uuid", "DiskUUID", C.QFT_TEXT, "UUID of {} disk", lambda d: d.uuid),
)


def _network_name(row: InstanceRow, nic: NIC) -> str | None:
    """The name of a NIC's network (None for a NIC on no network)."""
    return None if nic.network is None else row.ctx.network_names.get(nic.network)


# NIC properties: field name part, title part, description start, value.
_NIC_PROPERTIES: tuple[tuple[str, str, str, NicGet], ...] = (
    ("ip", "NicIP", "IP address", lambda r, n: n.ip),
    ("uuid", "NicUUID", "UUID address", lambda r, n: n.uuid),
    ("mac", "NicMAC", "MAC address", lambda r, n: n.mac),
    ("name", "NicName", "Name address", lambda r, n: n.name),
    ("network", "NicNetwork", "Network", lambda r, n: n.network),
    ("network.name", "NicNetworkName", "Network name", _network_name),
    ("mode", "NicMode", "Mode", _nicparam("mode")),
    ("link", "NicLink", "Link", _nicparam("link")),
    ("vlan", "NicVLAN", "VLAN", _vlan),
    ("bridge", "NicBridge", "Bridge", _bridge),
)

_NIC_LIST_DOC = "List containing each network interface's "

# Fields over all NICs: name, title, description, value of one NIC.
_NIC_LISTS: tuple[tuple[str, str, str, NicGet], ...] = (
    ("nic.macs", "NIC_MACs", _NIC_LIST_DOC + "MAC address", lambda r, n: n.mac),
    ("nic.ips", "NIC_IPs", _NIC_LIST_DOC + "IP address", lambda r, n: n.ip),
    ("nic.names", "NIC_Names", _NIC_LIST_DOC + "name", lambda r, n: n.name),
    ("nic.uuids", "NIC_UUIDs", _NIC_LIST_DOC + "UUID", lambda r, n: n.uuid),
    ("nic.modes", "NIC_modes", _NIC_LIST_DOC + "mode", _nicparam("mode")),
    ("nic.vlans", "NIC_VLANs", _NIC_LIST_DOC + "VLAN", _vlan),
    ("nic.bridges", "NIC_bridges", _NIC_LIST_DOC + "bridge", _bridge),
    ("nic.links", "NIC_links", _NIC_LIST_DOC + "link", _nicparam("link")),
    (
        "nic.networks",
        "NIC_networks",
        "List containing each interface's network",
        lambda r, n: n.network,
    ),
    (
        "nic.networks.names",
        "NIC_networks_names",
        "List containing each interface's network",
        _network_name,
    ),
)

# Fields over all disks: name, title, description, value of one disk.
_DISK_LISTS: tuple[tuple[str, str, str, DiskGet], ...] = (
    ("disk.sizes", "Disk_sizes", "List of disk sizes", lambda d: d.size),
    ("disk.spindles", "Disk_spindles", "List of disk spindles", lambda d: d.spindles),
    ("disk.names", "Disk_names", "List of disk names", lambda d: d.name),
    ("disk.uuids", "Disk_UUIDs", "List of disk UUIDs", lambda d: d.uuid),
)


def disk_fields() -> list[Field]:
    """Disk count, usage and template, the lists over all disks, one field per disk."""
    fields = [
        Field("disk.count", "Disks", C.QFT_NUMBER, "Number of disks", lambda r: len(r.obj.disks)),
        Field(
            "disk_usage",
            "DiskUsage",
            C.QFT_UNIT,
            "Total disk space used by instance on each of its nodes; this is not the disk"
            " size visible to the instance, but the usage on the node",
            _disk_usage,
        ),
        Field(
            "disk_template",
            "Disk_template",
            C.QFT_TEXT,
            "Instance disk template",
            lambda r: r.obj.disk_template,
        ),
    ]
    fields += [
        Field(name, title, C.QFT_OTHER, doc, _over_disks(get))
        for name, title, doc, get in _DISK_LISTS
    ]
    for idx in range(MAX_DISKS):
        fields += [
            Field(
                f"disk.{part}/{idx}",
                f"{title}/{idx}",
                kind,
                doc.format(ordinal(idx + 1)),
                _nth_disk(idx, get),
            )
            for part, title, kind, doc, get in _DISK_PROPERTIES
        ]
    return fields


def nic_fields() -> list[Field]:
    """NIC count, the lists over all NICs, one field per NIC and property."""
    fields = [
        Field(
            "nic.count",
            "NICs",
            C.QFT_NUMBER,
            "Number of network interfaces",
            lambda r: len(r.obj.nics),
        ),
        Field(
            "custom_nicparams",
            "CustomNicParameters",
            C.QFT_OTHER,
            "Custom network interface parameters",
            lambda r: [n.nicparams for n in r.obj.nics],
        ),
    ]
    fields += [
        Field(name, title, C.QFT_OTHER, doc, _over_nics(get))
        for name, title, doc, get in _NIC_LISTS
    ]
    for idx in range(MAX_NICS):
        fields += [
            Field(
                f"nic.{part}/{idx}",
                f"{title}/{idx}",
                C.QFT_TEXT,
                f"{doc} of {ordinal(idx + 1)} network interface",
                _nth_nic(idx, get),
            )
            for part, title, doc, get in _NIC_PROPERTIES
        ]
    return fields


def _disk_usage(row: InstanceRow) -> int:
    """Space the disks take on a node: their sizes (Corral's disk kinds have no
    metadata besides, unlike DRBD's)."""
    return sum(d.size for d in row.obj.disks)


def _over_disks(get: DiskGet) -> Callable[[InstanceRow], list[Any]]:
    return lambda row: [get(d) for d in row.obj.disks]


def _over_nics(get: NicGet) -> Callable[[InstanceRow], list[Any]]:
    return lambda row: [get(row, n) for n in row.obj.nics]


def _nth_disk(idx: int, get: DiskGet) -> Callable[[InstanceRow], Any]:
    def getter(row: InstanceRow) -> Any:
        disks = row.obj.disks
        value = get(disks[idx]) if idx < len(disks) else None
        return UNAVAIL if value is None else value

    return getter


def _nth_nic(idx: int, get: NicGet) -> Callable[[InstanceRow], Any]:
    def getter(row: InstanceRow) -> Any:
        nics = row.obj.nics
        value = get(row, nics[idx]) if idx < len(nics) else None
        return UNAVAIL if value is None else value

    return getter
