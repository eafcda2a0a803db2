"""The layout of ``gnt-instance info`` (Ganeti's generic info format)."""

from __future__ import annotations

from typing import Any

from corral.cli.info import generic_info_lines
from corral.cli.table import format_time, format_unit


def _params(actual: dict[str, Any], own: dict[str, Any]) -> dict[str, str]:
    """Each parameter as its own value, or ``default (value)`` when inherited."""
    return {
        key: (str(own[key]) if key in own else f"default ({actual[key]})") for key in sorted(actual)
    }


def _with_memory(own: dict[str, Any]) -> dict[str, Any]:
    """Ganeti shows the legacy ``memory`` next to ``maxmem``."""
    return {**own, "memory": own["maxmem"]} if "maxmem" in own else own


def _state(data: dict[str, Any]) -> str:
    config = data["config_state"]
    if data["run_state"] is None:
        return f"configured to be {config}"
    return f"configured to be {config}, actual state is {data['run_state']}"


def _nics(data: dict[str, Any]) -> list[Any]:
    out = []
    for idx, (name, uuid, ip, mac, mode, link, vlan, network, _) in enumerate(data["nics"]):
        out.append(
            [
                (f"nic/{idx}", ""),
                ("MAC", mac),
                ("IP", ip),
                ("mode", mode),
                ("link", link),
                ("vlan", vlan),
                ("network", network),
                ("UUID", uuid),
                ("name", name),
            ]
        )
    return out


def _disks(data: dict[str, Any]) -> list[Any]:
    out = []
    for idx, disk in enumerate(data["disks"]):
        out.append(
            [
                (f"disk/{idx}", f"{disk['dev_type']}, size {format_unit(disk['size'])}"),
                ("access mode", disk["mode"]),
                ("logical_id", disk["logical_id"]),
                ("name", disk["name"]),
                ("UUID", disk["uuid"]),
            ]
        )
    return out


def instance_info_lines(data: dict[str, Any]) -> list[str]:
    group = f"{data['pnode_group_name']} (UUID {data['pnode_group_uuid']})"
    items: list[tuple[str, Any]] = [
        ("Instance name", data["name"]),
        ("UUID", data["uuid"]),
        ("Serial number", data["serial_no"]),
        ("Creation time", format_time(data["ctime"])),
        ("Modification time", format_time(data["mtime"])),
        ("State", _state(data)),
        (
            "Nodes",
            [
                [("primary", data["pnode"]), ("group", group)],
                [
                    (
                        "secondaries",
                        ", ".join(
                            f"{name} (group {group}, group UUID {uuid})"
                            for name, group, uuid in zip(
                                data["snodes"],
                                data["snodes_group_names"],
                                data["snodes_group_uuids"],
                                strict=False,
                            )
                        ),
                    )
                ],
            ],
        ),
        ("Operating system", data["os"]),
        ("Operating system parameters", _params(data["os_actual"], data["os_instance"])),
        ("Allocated network port", data["network_port"]),
        ("Hypervisor", data["hypervisor"]),
        ("Hypervisor parameters", _params(data["hv_actual"], data["hv_instance"])),
        (
            "Back-end parameters",
            _params(
                {**data["be_actual"], "memory": data["be_actual"]["maxmem"]},
                _with_memory(data["be_instance"]),
            ),
        ),
        ("NICs", _nics(data)),
        ("Disk template", data["disk_template"]),
        ("Disks", _disks(data)),
    ]
    # Ganeti prints a list of instances: every one starts with "- ".
    lines = generic_info_lines(items, indent=1)
    return ["- " + lines[0].lstrip(), *lines[1:]]
