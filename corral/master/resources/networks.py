"""The "network" resource.

Corral has no ``gnt-network`` yet, so a cluster has no networks and this
resource has no rows; its fields are Ganeti's, so that ``QueryFields`` and
the classic ``QueryNetworks`` answer as Ganeti's do for such a cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral.master.resources.common import Names
from corral.query.fields import Field, FieldSet

if TYPE_CHECKING:
    from corral.services.context import Master

_DEFINITIONS = (
    ("ctime", "CTime", C.QFT_TIMESTAMP, "Creation timestamp"),
    ("external_reservations", "ExternalReservations", C.QFT_TEXT, "External reservations"),
    ("free_count", "FreeCount", C.QFT_NUMBER, "Number of available addresses"),
    ("gateway", "Gateway", C.QFT_OTHER, "IPv4 gateway"),
    ("gateway6", "IPv6Gateway", C.QFT_OTHER, "IPv6 gateway"),
    ("group_cnt", "NodeGroups", C.QFT_NUMBER, "Number of nodegroups"),
    (
        "group_list",
        "GroupList",
        C.QFT_OTHER,
        "List of nodegroups (group name, NIC mode, NIC link)",
    ),
    ("inst_cnt", "Instances", C.QFT_NUMBER, "Number of instances"),
    ("inst_list", "InstanceList", C.QFT_OTHER, "List of instances"),
    ("mac_prefix", "MacPrefix", C.QFT_OTHER, "MAC address prefix"),
    ("map", "Map", C.QFT_TEXT, "Actual mapping"),
    ("mtime", "MTime", C.QFT_TIMESTAMP, "Modification timestamp"),
    ("name", "Network", C.QFT_TEXT, "Name"),
    ("network", "Subnet", C.QFT_TEXT, "IPv4 subnet"),
    ("network6", "IPv6Subnet", C.QFT_OTHER, "IPv6 subnet"),
    ("reserved_count", "ReservedCount", C.QFT_NUMBER, "Number of reserved addresses"),
    (
        "serial_no",
        "SerialNo",
        C.QFT_NUMBER,
        "Network object serial number, incremented on each modification",
    ),
    ("tags", "Tags", C.QFT_OTHER, "Tags"),
    ("uuid", "UUID", C.QFT_TEXT, "Network UUID"),
)


def _no_value(row: Any) -> Any:  # there are no rows to read from
    raise AssertionError("networks have no rows")


FIELDS = FieldSet(
    Field(name, title, kind, doc, _no_value) for name, title, kind, doc in _DEFINITIONS
)


async def items(master: Master, needs: set[str], names: Names) -> list[Any]:
    """Every network of the cluster: none, as long as Corral has no networks."""
    return []
