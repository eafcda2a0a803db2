"""The environment of OS scripts, exactly as the OS interface defines it.

The master sends an *instance descriptor* (a plain dict: the instance with its
parameters already filled in and its disks' paths on the node) and its OS spec
(the merged OS parameters with their visibilities); the node, which knows its
own copy of the OS definition, turns them into variables here.
"""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral.osdef.definition import OSDefinition, split_name
from corral.osdef.spec import OsSpec


def param_var(name: str) -> str:
    """``OSP_<NAME>``: upper case, ``-`` becomes ``_``."""
    return "OSP_" + name.upper().replace("-", "_")


def os_core_env(osdef: OSDefinition, spec: OsSpec, debug: int = 0) -> dict[str, str]:
    """Variables every OS script gets (and all that ``verify`` gets): private
    and secret parameters too, which the scripts need in clear."""
    _, variant = split_name(spec.name)
    api = osdef.api_version
    env = {
        "OS_API_VERSION": str(api),
        "OS_NAME": osdef.name,
        "DEBUG_LEVEL": str(1 if debug else 0),
        "PATH": C.HOOKS_PATH,
    }
    if api >= 15:
        env["OS_VARIANT"] = variant or (osdef.variants[0] if osdef.variants else "")
    else:
        env["OS_VARIANT"] = ""
    for key, value in spec.script_values().items():
        env[param_var(key)] = value
    return env


def _disk_env(index: int, disk: dict[str, Any], hvparams: dict[str, Any]) -> dict[str, str]:
    env = {
        f"DISK_{index}_ACCESS": str(disk.get("mode", "rw")),
        f"DISK_{index}_UUID": str(disk["uuid"]),
        f"DISK_{index}_SIZE": str(disk["size"]),
    }
    if disk.get("path"):
        env[f"DISK_{index}_PATH"] = str(disk["path"])
    if disk.get("uri"):
        env[f"DISK_{index}_URI"] = str(disk["uri"])
    if disk.get("name"):
        env[f"DISK_{index}_NAME"] = str(disk["name"])
    if hvparams.get("disk_type"):
        env[f"DISK_{index}_FRONTEND_TYPE"] = str(hvparams["disk_type"])
    env[f"DISK_{index}_BACKEND_TYPE"] = str(disk.get("backend_type", "block"))
    return env


def _nic_env(index: int, nic: dict[str, Any], hvparams: dict[str, Any]) -> dict[str, str]:
    prefix = f"NIC_{index}_"
    env = {
        prefix + "MAC": str(nic["mac"]),
        prefix + "UUID": str(nic["uuid"]),
        prefix + "MODE": str(nic.get("mode", "bridged")),
    }
    if nic.get("name"):
        env[prefix + "NAME"] = str(nic["name"])
    if nic.get("ip"):
        env[prefix + "IP"] = str(nic["ip"])
    link = nic.get("link") or ""
    if nic.get("mode", "bridged") == "bridged":
        env[prefix + "BRIDGE"] = str(link)
    if link:
        env[prefix + "LINK"] = str(link)
    if hvparams.get("nic_type"):
        env[prefix + "FRONTEND_TYPE"] = str(hvparams["nic_type"])
    network = nic.get("network") or {}
    if network:
        env[prefix + "NETWORK_NAME"] = str(network.get("name", ""))
        env[prefix + "NETWORK_UUID"] = str(network.get("uuid", ""))
        env[prefix + "NETWORK_TAGS"] = " ".join(network.get("tags", []))
        for key in ("subnet", "gateway", "subnet6", "gateway6", "mac_prefix"):
            if network.get(key):
                env[prefix + "NETWORK_" + key.upper()] = str(network[key])
    return env


def instance_env(
    osdef: OSDefinition, inst: dict[str, Any], spec: OsSpec, debug: int = 0
) -> dict[str, str]:
    """The full environment of create/import/export/rename for one instance."""
    env = os_core_env(osdef, spec, debug)
    hvparams = inst.get("hvparams", {})
    env.update(
        {
            "INSTANCE_NAME": inst["name"],
            "INSTANCE_OS": inst["os"],
            "INSTANCE_UUID": inst["uuid"],
            "INSTANCE_CTIME": str(inst["ctime"]),
            "INSTANCE_MTIME": str(inst["mtime"]),
            "INSTANCE_PRIMARY_NODE": inst["primary_node"],
            "INSTANCE_SECONDARY_NODES": " ".join(inst.get("secondary_nodes", [])),
            "HYPERVISOR": inst["hypervisor"],
            "DISK_COUNT": str(len(inst["disks"])),
            "NIC_COUNT": str(len(inst["nics"])),
        }
    )
    for index, disk in enumerate(inst["disks"]):
        env.update(_disk_env(index, disk, hvparams))
    for index, nic in enumerate(inst["nics"]):
        env.update(_nic_env(index, nic, hvparams))
    for key, value in inst.get("beparams", {}).items():
        env[f"INSTANCE_BE_{key}"] = str(value)
    for key, value in hvparams.items():
        env[f"INSTANCE_HV_{key}"] = str(value)
    return env


def disk_transfer_env(
    env: dict[str, str],
    direction: str,
    index: int,
    path: str | None,
    uri: str | None = None,
    size_fd: int | None = None,
) -> dict[str, str]:
    """The extras of the ``export`` and ``import`` scripts, run once per disk.

    ``direction`` is ``"export"`` or ``"import"``: the disk is named by
    ``<DIR>_INDEX``, ``<DIR>_DISK_PATH`` with its alias ``<DIR>_DEVICE``, and
    ``<DIR>_DISK_URI``; ``EXP_SIZE_FD`` is where an export script may write the
    byte size of its stream (followed by a newline) for progress reports.
    """
    if direction not in ("export", "import"):
        raise ValueError(f"Unknown transfer direction {direction!r}")
    prefix = direction.upper()
    out = dict(env)
    out[f"{prefix}_INDEX"] = str(index)
    if path:
        out[f"{prefix}_DISK_PATH"] = path
        out[f"{prefix}_DEVICE"] = path
    if uri:
        out[f"{prefix}_DISK_URI"] = uri
    if size_fd is not None:
        out["EXP_SIZE_FD"] = str(size_fd)
    return out
