"""The layout of ``gnt-instance info``: Ganeti's generic info of each instance."""

from __future__ import annotations

from corral.cli.table import format_time
from corral.paramtypes import format_unit

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any


def params_info(own: dict[str, Any], actual: dict[str, Any]) -> dict[str, Any]:
    """Each parameter as its own value, or ``default (value)`` when inherited
    (nested dicts likewise), as Ganeti's FormatParamsDictInfo."""
    out: dict[str, Any] = {}
    for key, value in actual.items():
        if isinstance(value, dict) and value:
            out[key] = params_info(own.get(key, {}), value)
        else:
            out[key] = str(own.get(key, f"default ({value})"))
    return out


def _nodes(data: dict[str, Any]) -> list[Any]:
    group = f"{data['pnode_group_name']} (UUID {data['pnode_group_uuid']})"
    secondaries = ", ".join(
        f"{name} (group {group_name}, group UUID {group_uuid})"
        for name, group_name, group_uuid in zip(
            data["snodes"], data["snodes_group_names"], data["snodes_group_uuids"], strict=False
        )
    )
    return [[("primary", data["pnode"]), ("group", group)], [("secondaries", secondaries)]]


def _nic(index: int, nic: list[Any]) -> list[tuple[str, str]]:
    name, uuid, ip, mac, mode, link, vlan, _network, netinfo = nic
    network = netinfo["name"] if netinfo else None
    return [
        (f"nic/{index}", ""),
        ("MAC", str(mac)),
        ("IP", str(ip)),
        ("mode", str(mode)),
        ("link", str(link)),
        ("vlan", str(vlan)),
        ("network", str(network)),
        ("UUID", str(uuid)),
        ("name", str(name)),
    ]


def _disk(index: int, disk: dict[str, Any], top_level: bool = True) -> list[tuple[str, Any]]:
    if top_level:
        label = disk["iv_name"] if disk["iv_name"] is not None else f"disk {index}"
    else:
        label = f"child {index}"
    size = format_unit(disk["size"]) if isinstance(disk["size"], int) else str(disk["size"])
    data: list[tuple[str, Any]] = [(label, f"{disk['dev_type']}, size {size}")]
    if top_level:
        if disk.get("spindles") is not None:
            data.append(("spindles", disk["spindles"]))
        data.append(("access mode", disk["mode"]))
    if disk["logical_id"] is not None:
        # As Ganeti for file-based disks: the logical id as Python shows a list.
        data.append(("logical_id", str(disk["logical_id"])))
    data += [("name", disk["name"]), ("UUID", disk["uuid"])]
    if disk.get("copies"):  # Corral's: a mirrored disk's copies
        copies = ", ".join(f"{node} ({state})" for node, state in disk["copies"])
        data.append(("copies", f"{copies}; sync generation {disk['generation']}"))
    children = disk.get("children") or []
    if children:
        data.append(("child devices", [_disk(i, child, False) for i, child in enumerate(children)]))
    return data


def instance_info(data: dict[str, Any]) -> list[tuple[str, Any]]:
    """One instance (an OP_INSTANCE_QUERY_DATA entry) as Ganeti shows it."""
    state = f"configured to be {data['config_state']}"
    if data["run_state"]:
        state += f", actual state is {data['run_state']}"
    info: list[tuple[str, Any]] = [
        ("Instance name", data["name"]),
        ("UUID", data["uuid"]),
        ("Serial number", str(data["serial_no"])),
        ("Creation time", format_time(data["ctime"])),
        ("Modification time", format_time(data["mtime"])),
        ("State", state),
        ("Nodes", _nodes(data)),
        ("Operating system", data["os"]),
        ("Operating system parameters", params_info(data["os_instance"], data["os_actual"])),
    ]
    if "network_port" in data:
        info.append(("Allocated network port", str(data["network_port"])))
    info.append(("Hypervisor", data["hypervisor"]))
    be_actual = {**data["be_actual"], "memory": data["be_actual"]["maxmem"]}
    info += [
        ("Hypervisor parameters", params_info(data["hv_instance"], data["hv_actual"])),
        ("Back-end parameters", params_info(data["be_instance"], be_actual)),
        ("NICs", [_nic(index, nic) for index, nic in enumerate(data["nics"])]),
        ("Disk template", data["disk_template"]),
        ("Disks", [_disk(index, disk) for index, disk in enumerate(data["disks"])]),
    ]
    return info
