"""The kvm hypervisor's checks across parameters, on the filled parameters: those
Ganeti's ``KVMHypervisor.CheckParameterSyntax`` makes on the master
(:data:`CROSS_CHECKS`) and those its ``ValidateParameters`` makes on a node
(:func:`node_problems`). Each check returns what is wrong and what to do, or None.
"""

from __future__ import annotations

import ipaddress
import os
import pwd
import re
from collections.abc import Callable, Mapping
from typing import Any

from corral.hvparams.kvm import SERIAL_SPEEDS
from corral.hvparams.rows import is_norm_abs_path

Params = Mapping[str, Any]

# SPICE parameters that mean nothing without spice_bind (Ganeti's _SPICE_ADDITIONAL_PARAMS).
_SPICE_DEPENDENT = (
    "spice_ip_version",
    "spice_password_file",
    "spice_image_compression",
    "spice_jpeg_wan_compression",
    "spice_zlib_glz_wan_compression",
    "spice_streaming_video",
    "spice_use_tls",
)


def _ip_version(text: str) -> int | None:
    try:
        return ipaddress.ip_address(text).version
    except ValueError:
        return None


def _boot(hv: Params) -> str | None:
    if hv["boot_order"] == "cdrom" and not hv["cdrom_image_path"]:
        return "Cannot boot from cdrom without an ISO image: set cdrom_image_path"
    if hv["kernel_path"] and not hv["root_path"]:
        return (
            "A kernel is given (kernel_path) but no root partition: set root_path"
            " (e.g. /dev/vda1), or set kernel_path to '' to boot from the disk"
        )
    return None


def _security_model(hv: Params) -> str | None:
    model, domain = hv["security_model"], hv["security_domain"]
    if model == "user" and not domain:
        return "The security model 'user' needs the user to run kvm as: set security_domain"
    if model in ("none", "pool") and domain:
        return (
            f"A security domain cannot be given with the security model '{model}':"
            " set security_domain to '', or security_model to 'user'"
        )
    return None


def _console(hv: Params) -> str | None:
    speed = hv["serial_speed"]
    if hv["serial_console"] and (not speed or speed not in SERIAL_SPEEDS):
        return (
            f"Invalid serial console speed {speed!r}: use one of"
            f" {', '.join(map(str, SERIAL_SPEEDS))}"
        )
    return None


def _vnc(hv: Params) -> str | None:
    if hv["vnc_x509_verify"] and not hv["vnc_x509_path"]:
        return "vnc_x509_verify needs the certificates' directory: set vnc_x509_path"
    return None


def _spice(hv: Params) -> str | None:
    bind, version = hv["spice_bind"], hv["spice_ip_version"]
    if not bind:
        for name in _SPICE_DEPENDENT:
            if hv[name]:
                return f"SPICE: {name} needs spice_bind: set spice_bind, or {name} to its default"
        return None
    found = _ip_version(bind)
    if version and found is not None and found != version:
        return (
            f"SPICE: spice_bind is an IPv{found} address ({bind}) but spice_ip_version"
            f" is {version}: make them agree"
        )
    return None


def _disk_cache(hv: Params) -> str | None:
    if hv["disk_aio"] == "native" and hv["disk_cache"] != "none":
        return "With disk_aio 'native', disk_cache must be 'none': set disk_cache=none"
    return None


# In Ganeti's order.
CROSS_CHECKS: tuple[Callable[[Params], str | None], ...] = (
    _boot,
    _security_model,
    _console,
    _vnc,
    _spice,
    _disk_cache,
)


def _is_interface(name: str) -> bool:
    return os.path.exists(os.path.join("/sys/class/net", name))


def _bind_problems(hv: Params, qemu_help: str | None) -> list[str]:
    problems = []
    vnc = hv["vnc_bind_address"]
    if vnc and _ip_version(vnc) is None and not _is_interface(vnc) and not is_norm_abs_path(vnc):
        problems.append(
            f"vnc_bind_address '{vnc}' is neither an IP address, an interface of this node,"
            " nor an absolute path: give one of those"
        )
    spice = hv["spice_bind"]
    if not spice:
        return problems
    if vnc:
        problems.append(
            "Both SPICE and VNC are configured: set vnc_bind_address or spice_bind to ''"
        )
    if qemu_help is not None and not re.search(r"^-spice\s", qemu_help, re.M):
        problems.append(f"{hv['kvm_path']} has no SPICE support: set spice_bind to ''")
    if _ip_version(spice) is None and not _is_interface(spice):
        problems.append(
            f"spice_bind '{spice}' is neither an IP address nor an interface of this node"
        )
    return problems


def node_problems(hv: Params, qemu_help: str | None, qemu_machines: str | None) -> list[str]:
    """What Ganeti's kvm ``ValidateParameters`` checks beyond the single parameters:
    the security domain's user, the VNC and SPICE bind addresses, the machine
    version. ``qemu_help``/``qemu_machines``: the output of ``kvm --help`` and
    ``kvm -machine ?`` (None: not checked)."""
    problems = []
    if hv["security_model"] == "user":
        try:
            pwd.getpwnam(hv["security_domain"])
        except KeyError:
            problems.append(
                f"The security domain user '{hv['security_domain']}' does not exist on"
                " this node: create it, or change security_domain"
            )
    problems += _bind_problems(hv, qemu_help)
    version = hv["machine_version"]
    known = qemu_machines is None or re.search(
        rf"^({re.escape(version)})[ ]+.*PC", qemu_machines, re.M
    )
    if version and not known:
        problems.append(
            f"{hv['kvm_path']} does not support the machine version '{version}':"
            " see its '-machine help' for the versions it has"
        )
    return problems
