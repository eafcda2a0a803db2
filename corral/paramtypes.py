"""Ganeti's parameter value types (its VTYPE_*), declared once for the
commands and masterd, and its conversions: ParseUnit (sizes) and
ForceDictType (a dict of parameters).  Stdlib only: the gnt-* commands use it.

Each door converts as Ganeti's same door does.  The commands check ``-B``,
``-H`` and ``--net`` against the tables below and turn sizes into MiB rounded
up to a multiple of 4 (``--disk size=1025`` is 1028 MiB); masterd converts a
backend parameter's size the same way whatever door it came through (Ganeti's
ForceDictType in the logical units), while a disk's size given through luxi or
RAPI is taken as given (Ganeti's ``int(size)``).

The hypervisor table lists every hypervisor's parameters, as Ganeti's does:
the commands check names and types; whether the cluster's hypervisor has the
parameter is for masterd to say (corral.hvparams).
"""

from __future__ import annotations

import re

from corral import errors

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

STRING = "string"
MAYBE_STRING = "maybe-string"
BOOL = "bool"
SIZE = "size"
INT = "int"
FLOAT = "float"

BE_PARAMETER_TYPES: dict[str, str] = {
    "always_failover": BOOL,
    "auto_balance": BOOL,
    "maxmem": SIZE,
    "memory": SIZE,
    "minmem": SIZE,
    "spindle_use": INT,
    "vcpus": INT,
}
NIC_PARAMETER_TYPES: dict[str, str] = {
    "bridge": MAYBE_STRING,
    "ip": MAYBE_STRING,
    "link": STRING,
    "mac": STRING,
    "mode": STRING,
    "name": MAYBE_STRING,
    "network": MAYBE_STRING,
    "vlan": MAYBE_STRING,
}
HV_PARAMETER_TYPES: dict[str, str] = {
    "acpi": BOOL,
    "blockdev_prefix": STRING,
    "boot_order": STRING,
    "bootloader_args": STRING,
    "bootloader_path": STRING,
    "cdrom2_image_path": STRING,
    "cdrom_disk_type": STRING,
    "cdrom_image_path": STRING,
    "cpu_cap": INT,
    "cpu_cores": INT,
    "cpu_mask": STRING,
    "cpu_sockets": INT,
    "cpu_threads": INT,
    "cpu_type": STRING,
    "cpu_weight": INT,
    "cpuid": STRING,
    "device_model": STRING,
    "devices": STRING,
    "disk_aio": STRING,
    "disk_cache": STRING,
    "disk_discard": STRING,
    "disk_type": STRING,
    "drop_capabilities": STRING,
    "extra_cgroups": STRING,
    "extra_config": STRING,
    "floppy_image_path": STRING,
    "init_script": STRING,
    "initrd_path": STRING,
    "kernel_args": STRING,
    "kernel_path": STRING,
    "keymap": STRING,
    "kvm_extra": STRING,
    "kvm_flag": STRING,
    "kvm_path": STRING,
    "kvm_pci_reservations": INT,
    "machine_version": STRING,
    "mem_path": STRING,
    "migration_bandwidth": INT,
    "migration_caps": STRING,
    "migration_downtime": INT,
    "migration_mode": STRING,
    "migration_port": INT,
    "nic_type": STRING,
    "num_ttys": INT,
    "pae": BOOL,
    "pci_pass": STRING,
    "reboot_behavior": STRING,
    "root_path": MAYBE_STRING,
    "scsi_controller_type": STRING,
    "security_domain": STRING,
    "security_model": STRING,
    "serial_console": BOOL,
    "serial_speed": INT,
    "soundhw": STRING,
    "spice_bind": STRING,
    "spice_image_compression": STRING,
    "spice_ip_version": INT,
    "spice_jpeg_wan_compression": STRING,
    "spice_password_file": STRING,
    "spice_playback_compression": BOOL,
    "spice_streaming_video": STRING,
    "spice_tls_ciphers": STRING,
    "spice_use_tls": BOOL,
    "spice_use_vdagent": BOOL,
    "spice_zlib_glz_wan_compression": STRING,
    "startup_timeout": INT,
    "usb_devices": STRING,
    "usb_mouse": STRING,
    "use_bootloader": BOOL,
    "use_chroot": BOOL,
    "use_guest_agent": BOOL,
    "use_localtime": BOOL,
    "use_namespaces": BOOL,  # Corral's own (kvm)
    "use_network_rules": BOOL,  # Corral's own (kvm)
    "user_shutdown": BOOL,
    "vga": STRING,
    "vhost_net": BOOL,
    "vif_script": STRING,
    "vif_type": STRING,
    "viridian": BOOL,
    "virtio_net_queues": INT,
    "vnc_bind_address": STRING,
    "vnc_password_file": STRING,
    "vnc_tls": BOOL,
    "vnc_x509_path": STRING,
    "vnc_x509_verify": BOOL,
    "vnet_hdr": BOOL,
    "xen_cmd": STRING,
}

_UNIT_RE = re.compile(r"^([.\d]+)\s*([a-zA-Z]+)?$")
_UNIT_FACTORS = {"m": 1, "mb": 1, "mib": 1, "g": 1024, "gb": 1024, "gib": 1024}
_UNIT_FACTORS.update({"t": 1024 * 1024, "tb": 1024 * 1024, "tib": 1024 * 1024})


def parse_unit(text: Any) -> int:
    """MiB from ``512``, ``1.5g``, ``2 TiB``..., rounded up to a multiple of 4 (as
    Ganeti's ParseUnit); UnitParseError on anything else."""
    match = _UNIT_RE.match(str(text))
    if match is None:
        raise errors.UnitParseError("Invalid format")
    unit = (match.group(2) or "m").lower()
    if unit not in _UNIT_FACTORS:
        raise errors.UnitParseError(f"Unknown unit: {match.group(2)}")
    try:
        value = float(match.group(1)) * _UNIT_FACTORS[unit]
    except ValueError:
        raise errors.UnitParseError("Invalid format") from None
    mib = int(value) + (1 if int(value) < value else 0)
    return mib + (-mib % 4)


def force_dict_type(
    target: dict[str, Any], key_types: dict[str, str], allowed: tuple[Any, ...] = ()
) -> None:
    """Check and convert ``target``'s values in place, as Ganeti's ForceDictType."""
    if not isinstance(target, dict):
        raise errors.TypeEnforcementError(f"Expected dictionary, got '{target}'")
    for key in target:
        if key not in key_types:
            raise errors.TypeEnforcementError(f"Unknown parameter '{key}'")
        if target[key] in allowed:
            continue
        target[key] = _convert(key, target[key], key_types[key])


def _convert(key: str, value: Any, kind: str) -> Any:
    if kind in (STRING, MAYBE_STRING):
        if value is None and kind == MAYBE_STRING:
            return None
        if isinstance(value, str):
            return value
        if value is False:
            return ""
        raise errors.TypeEnforcementError(f"'{key}' (value {value}) is not a valid string")
    if kind == BOOL:
        if isinstance(value, str) and value:
            if value.lower() in ("true", "false"):
                return value.lower() == "true"
            raise errors.TypeEnforcementError(f"'{key}' (value {value}) is not a valid boolean")
        return bool(value)
    if kind == SIZE:
        try:
            return parse_unit(value)
        except errors.UnitParseError as err:
            raise errors.TypeEnforcementError(
                f"'{key}' (value {value}) is not a valid size. error: {err}"
            ) from None
    converter = int if kind == INT else float
    try:
        return converter(value)
    except (ValueError, TypeError):
        name = "integer" if kind == INT else "float"
        raise errors.TypeEnforcementError(
            f"'{key}' (value {value}) is not a valid {name}"
        ) from None


def format_unit(value: Any, units: str = "h") -> str:
    """A size in MiB as Ganeti shows it: ``h`` gives ``128M``, ``1.0G``, ``2.0T``."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return str(value)
    if units == "h":
        if value < 1024:
            return f"{int(value)}M"
        if value < 1024 * 1024:
            return f"{value / 1024:.1f}G"
        return f"{value / 1024 / 1024:.1f}T"
    divisor = {"m": 1, "g": 1024, "t": 1024 * 1024}.get(units, 1)
    return str(int(value)) if divisor == 1 else f"{value / divisor:.1f}"
