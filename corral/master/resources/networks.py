"""The "network" resource: networks with their pools, groups and instances.

Values are luxid's: the node groups a network is connected to as
``[group, mode, link, vlan]`` and its instances in the order of their
uuids (luxid walks its maps so), the externally reserved addresses joined
by ", ", and the pool's map with ``X`` for a reserved address.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral.master.resources.common import Names, object_fields
from corral.netpool import AddressPool
from corral.nicesort import nice_sort
from corral.objects import Network
from corral.query.fields import UNAVAIL, Field, FieldSet

if TYPE_CHECKING:
    from corral.services.context import Master

# What fields need beyond the network object (see FieldSet.needs).
POOL = "pool"
GROUPS = "groups"
INSTANCES = "instances"


@dataclass
class NetworkRow:
    obj: Network
    pool: AddressPool | None = None
    groups: list[list[str]] = field(default_factory=list)
    instances: list[str] = field(default_factory=list)


def _maybe(attribute: str) -> Any:
    def getter(row: NetworkRow) -> Any:
        value = getattr(row.obj, attribute)
        return UNAVAIL if value is None else value

    return getter


def _pool(row: NetworkRow) -> AddressPool:
    assert row.pool is not None
    return row.pool


_FIELDS = [
    Field("name", "Network", C.QFT_TEXT, "Name", lambda r: r.obj.name),
    Field("network", "Subnet", C.QFT_TEXT, "IPv4 subnet", lambda r: r.obj.network),
    Field("gateway", "Gateway", C.QFT_OTHER, "IPv4 gateway", _maybe("gateway")),
    Field("network6", "IPv6Subnet", C.QFT_OTHER, "IPv6 subnet", _maybe("network6")),
    Field("gateway6", "IPv6Gateway", C.QFT_OTHER, "IPv6 gateway", _maybe("gateway6")),
    Field("mac_prefix", "MacPrefix", C.QFT_OTHER, "MAC address prefix", _maybe("mac_prefix")),
    Field(
        "free_count",
        "FreeCount",
        C.QFT_NUMBER,
        "Number of available addresses",
        lambda r: _pool(r).free_count,
        (POOL,),
    ),
    Field("map", "Map", C.QFT_TEXT, "Actual mapping", lambda r: _pool(r).map(), (POOL,)),
    Field(
        "reserved_count",
        "ReservedCount",
        C.QFT_NUMBER,
        "Number of reserved addresses",
        lambda r: _pool(r).reserved_count,
        (POOL,),
    ),
    Field(
        "group_list",
        "GroupList",
        C.QFT_OTHER,
        "List of nodegroups (group name, NIC mode, NIC link)",
        lambda r: r.groups,
        (GROUPS,),
    ),
    Field(
        "group_cnt",
        "NodeGroups",
        C.QFT_NUMBER,
        "Number of nodegroups",
        lambda r: len(r.groups),
        (GROUPS,),
    ),
    Field(
        "inst_list",
        "InstanceList",
        C.QFT_OTHER,
        "List of instances",
        lambda r: r.instances,
        (INSTANCES,),
    ),
    Field(
        "inst_cnt",
        "Instances",
        C.QFT_NUMBER,
        "Number of instances",
        lambda r: len(r.instances),
        (INSTANCES,),
    ),
    Field(
        "external_reservations",
        "ExternalReservations",
        C.QFT_TEXT,
        "External reservations",
        lambda r: ", ".join(r.obj.ext_reservations),
    ),
]

FIELDS = FieldSet([*_FIELDS, *object_fields("Network")])


def _connection(params: dict[str, Any]) -> list[str]:
    """mode, link and vlan of a group's connection ("-" for one missing)."""
    return [str(params.get(key, "-")) for key in ("mode", "link", "vlan")]


async def items(master: Master, needs: set[str], names: Names) -> list[NetworkRow]:
    """The networks (by nice-sorted name), with what ``needs`` asks for."""
    cfg = master.cfg
    networks = {n.name: n for n in cfg.networks()}
    rows = [NetworkRow(networks[name]) for name in nice_sort(networks)]
    if names is not None:
        rows = [row for row in rows if row.obj.name in names]
    if POOL in needs:
        for row in rows:
            row.pool = AddressPool(row.obj, cfg.network_ips(row.obj.uuid))
    if GROUPS in needs:
        groups = sorted(cfg.groups(), key=lambda g: g.uuid)
        for row in rows:
            row.groups = [
                [g.name, *_connection(g.networks[row.obj.uuid])]
                for g in groups
                if row.obj.uuid in g.networks
            ]
    if INSTANCES in needs:
        instances = sorted(cfg.instances(), key=lambda i: i.uuid)
        for row in rows:
            uuid = row.obj.uuid
            row.instances = [i.name for i in instances if any(n.network == uuid for n in i.nics)]
    return rows
