"""gnt-instance's parameter options (``--disk``, ``--net``, ``-B``, ``-H``,
``-O``...), parsed and checked as Ganeti's commands do, and the opcodes of
``add`` and ``modify`` built from them."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from corral import constants as C
from corral import errors
from corral import paramtypes as T
from corral.cli.optvalues import boolean, split_key_val
from corral.osdef import install_settings
from corral.storage_names import DISK_TEMPLATE_NAMES, DT_DISKLESS

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

parse_unit = T.parse_unit
_DEVICE_ACTIONS = ("add", "attach", "remove", "detach", "modify")


# Option value types (argparse ``type=`` functions; errors as Ganeti's parser's)


def split_ident_key_val(option: str, value: str) -> tuple[str, Any]:
    """``ident:k=v,...`` → ``(ident, {k: v})`` (``no_ident``: False, ``-ident``: None)."""
    ident, _, rest = value.partition(":")
    removing = ident.startswith("no_") or (
        ident.startswith("-") and (len(ident) == 1 or not ident[1].isdigit())
    )
    if removing:
        if rest:
            raise errors.ParameterError(
                f"Cannot pass options when removing parameter groups: {value}"
            )
        return (ident[3:], False) if ident.startswith("no_") else (ident[1:], None)
    return ident, split_key_val(option, rest)


def key_val(option: str) -> Callable[[str], dict[str, Any]]:
    return lambda value: split_key_val(option, value)


def ident_key_val(option: str) -> Callable[[str], tuple[str, Any]]:
    return lambda value: split_ident_key_val(option, value)


def unit(value: str) -> int:
    try:
        return parse_unit(value)
    except errors.UnitParseError as err:
        raise errors.ParameterError(f"Invalid value '{value}': {err}") from None


# Options
def add_create_options(p: argparse.ArgumentParser, mode: str = "create") -> None:
    """The options of ``gnt-instance add`` (Ganeti's COMMON_CREATE_OPTS and
    add_opts), or with ``mode="import"`` of ``gnt-backup import`` (its
    import_opts instead of add_opts)."""
    p.add_argument("-B", "--backend-parameters", dest="beparams", type=key_val("-B"),
                   default={})  # fmt: skip
    p.add_argument("--disk", dest="disks", action="append", type=ident_key_val("--disk"))
    # Ganeti's names and Corral's own (Ganeti's drbd asks for mirrored).
    p.add_argument("-t", "--disk-template", dest="disk_template", choices=DISK_TEMPLATE_NAMES)
    p.add_argument("--file-storage-dir")
    p.add_argument("--file-driver", choices=["loop", "blktap", "blktap2"])
    p.add_argument("-H", "--hypervisor-parameters", dest="hypervisor", type=ident_key_val("-H"))
    p.add_argument("-I", "--iallocator")
    p.add_argument("--net", dest="nics", action="append", type=ident_key_val("--net"))
    p.add_argument("-n", "--node")
    p.add_argument("-g", "--node-group", dest="nodegroup")
    p.add_argument("--no-ip-check", dest="ip_check", action="store_false")
    p.add_argument("--no-conflicts-check", dest="conflicts_check", action="store_false")
    p.add_argument("--no-name-check", dest="name_check", action="store_false")
    p.add_argument("--no-nics", action="store_true")
    p.add_argument("--no-wait-for-sync", dest="wait_for_sync", action="store_false")
    _os_parameters(p, secret=True)
    p.add_argument("-s", "--os-size", dest="sd_size", type=unit)
    p.add_argument("--opportunistic-locking", action="store_true")
    p.add_argument("--tags")
    if mode == "import":
        p.add_argument("--identify-defaults", action="store_true")
        p.add_argument("--src-dir", metavar="<dir>")
        p.add_argument("--src-node", metavar="<node>")
        p.add_argument("--compress", default="none")
    else:
        _add_only_options(p)
    p.add_argument("--ignore-ipolicy", action="store_true")
    p.add_argument("--helper-startup-timeout", type=int)
    p.add_argument("--helper-shutdown-timeout", type=int)


def _add_only_options(p: argparse.ArgumentParser) -> None:
    """Ganeti's add_opts that gnt-backup import lacks."""
    p.add_argument("--forthcoming", action="store_true")
    p.add_argument("--commit", action="store_true")
    p.add_argument("--no-start", dest="start", action="store_false")
    p.add_argument("-o", "--os-type", dest="os")
    p.add_argument("--force-variant", action="store_true")
    p.add_argument("--no-install", action="store_true")
    p.add_argument("-c", "--communication", dest="instance_communication", type=boolean)
    add_safe_install_option(p)


def add_safe_install_option(p: argparse.ArgumentParser) -> None:
    """design-os's ``--enable-safe-install=yes|no``: the OS create script in
    the helper VM or on the node (unset: by the OS's trust); Corral carries it
    as the OS parameter of that name (:mod:`corral.osdef.install_settings`)."""
    p.add_argument("--enable-safe-install", dest="enable_safe_install", type=boolean)


def with_safe_install(osparams: dict[str, Any] | None, opts: argparse.Namespace) -> Any:
    """``osparams`` with ``--enable-safe-install``'s value, if it was given."""
    if opts.enable_safe_install is None:
        return osparams
    value = "yes" if opts.enable_safe_install else "no"
    return {**(osparams or {}), install_settings.SAFE_INSTALL: value}


def add_modify_options(p: argparse.ArgumentParser) -> None:
    """The options of ``gnt-instance modify`` (besides ``-f`` and the OS parameters)."""
    p.add_argument("-B", "--backend-parameters", dest="beparams", type=key_val("-B"),
                   default={})  # fmt: skip
    p.add_argument("--disk", dest="disks", action="append", type=ident_key_val("--disk"),
                   default=[])  # fmt: skip
    p.add_argument("-H", "--hypervisor-parameters", dest="hvparams", type=key_val("-H"),
                   default={})  # fmt: skip
    p.add_argument("--net", dest="nics", action="append", type=ident_key_val("--net"),
                   default=[])  # fmt: skip
    p.add_argument("-t", "--disk-template", dest="disk_template", choices=DISK_TEMPLATE_NAMES)
    p.add_argument("-n", "--node")
    p.add_argument("-I", "--iallocator")
    p.add_argument("-o", "--os-type", dest="os")
    p.add_argument("--force-variant", action="store_true")
    p.add_argument("--no-wait-for-sync", dest="wait_for_sync", action="store_false")
    p.add_argument("--offline", dest="offline_inst", action="store_true")
    p.add_argument("--online", dest="online_inst", action="store_true")
    p.add_argument("--ignore-ipolicy", action="store_true")
    p.add_argument("-m", "--runtime-memory", dest="runtime_mem", type=unit)
    p.add_argument("--no-conflicts-check", dest="conflicts_check", action="store_false")
    p.add_argument("--new-primary", dest="new_primary_node")
    p.add_argument("--hotplug", action="store_true")
    p.add_argument("--hotplug-if-possible", action="store_true")
    p.add_argument("-c", "--communication", dest="instance_communication", type=boolean)
    p.add_argument("-e", "--ext-params", type=key_val("-e"), default={})
    p.add_argument("--file-driver", choices=["loop", "blktap", "blktap2"])
    p.add_argument("--file-storage-dir")


def _os_parameters(p: argparse.ArgumentParser, secret: bool) -> None:
    p.add_argument("-O", "--os-parameters", dest="osparams", type=key_val("-O"), default={})
    p.add_argument("--os-parameters-private", dest="osparams_private",
                   type=key_val("--os-parameters-private"), default={})  # fmt: skip
    if secret:
        p.add_argument("--os-parameters-secret", dest="osparams_secret",
                       type=key_val("--os-parameters-secret"), default={})  # fmt: skip


def add_os_parameter_options(p: argparse.ArgumentParser, secret: bool = True) -> None:
    """``-O``, ``--os-parameters-private`` (and ``--os-parameters-secret``)."""
    _os_parameters(p, secret)


# add
def _invalid(message: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(message, C.ECODE_INVAL)


def nics_from(specs: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """``--net`` options as the opcode's NIC list (Ganeti's ParseNicOption)."""
    try:
        count = max(int(index) + 1 for index, _ in specs)
    except ValueError as err:
        raise _invalid(f"Invalid NIC index passed: {err}") from None
    nics: list[dict[str, Any]] = [{}] * count
    for index_text, params in specs:
        index = int(index_text)
        if not isinstance(params, dict):
            raise _invalid(f"Invalid nic/{index} value: expected dict, got {params}")
        T.force_dict_type(params, T.NIC_PARAMETER_TYPES)
        nics[index] = params
    return nics


def disks_from(opts: argparse.Namespace, mode: str = "create") -> list[dict[str, Any]]:
    """``--disk``/``-s`` options as the opcode's disk list (Ganeti's checks; an
    import may give none: the export's are taken)."""
    if opts.disk_template == DT_DISKLESS:
        if opts.disks or opts.sd_size is not None:
            raise _invalid("Diskless instance but disk information passed")
        return []
    if not opts.disks and not opts.sd_size and mode == "create":
        raise _invalid("No disk information specified")
    if opts.disks and opts.sd_size is not None:
        raise _invalid("Please use either the '--disk' or '-s' option")
    specs = opts.disks or ([("0", {"size": opts.sd_size})] if opts.sd_size is not None else [])
    if not specs:
        return []
    try:
        count = max(int(index) + 1 for index, _ in specs)
    except ValueError as err:
        raise _invalid(f"Invalid disk index passed: {err}") from None
    disks: list[dict[str, Any]] = [{}] * count
    for index_text, params in specs:
        disks[int(index_text)] = _disk_spec(int(index_text), params, mode)
    return disks


def _disk_spec(index: int, params: Any, mode: str = "create") -> dict[str, Any]:
    if not isinstance(params, dict):
        raise _invalid(f"Invalid disk/{index} value: expected dict, got {params}")
    if "size" in params:
        if "adopt" in params:
            raise _invalid(f"Only one of 'size' and 'adopt' allowed (disk {index})")
        try:
            params["size"] = parse_unit(params["size"])
        except errors.UnitParseError as err:
            raise _invalid(f"Invalid disk size for disk {index}: {err}") from None
    elif "adopt" in params:
        if "spindles" in params:
            raise _invalid("spindles is not a valid option when adopting a disk")
        if mode == "import":
            raise _invalid("Disk adoption not allowed for instance import")
        params["size"] = 0
    else:
        raise _invalid(f"Missing size or adoption source for disk {index}")
    if "spindles" in params:
        params["spindles"] = int(params["spindles"])
    return params


def _mode_fields(opts: argparse.Namespace, mode: str) -> dict[str, Any]:
    """The fields that differ between a creation and an import (Ganeti's
    GenericInstanceCreate: an import never starts, installs or sets an OS)."""
    if mode == "create":
        return {
            "start": opts.start,
            "os_type": opts.os,
            "force_variant": opts.force_variant,
            "compress": "none",
            "no_install": opts.no_install,
            "identify_defaults": False,
            "instance_communication": bool(opts.instance_communication),
        }
    return {
        "start": False,
        "os_type": None,
        "force_variant": False,
        "src_node": opts.src_node,
        "src_path": opts.src_dir,
        "compress": opts.compress,
        "no_install": None,
        "identify_defaults": opts.identify_defaults,
        "instance_communication": False,
    }


def create_opcode(opts: argparse.Namespace, name: str, mode: str = "create") -> dict[str, Any]:
    """OP_INSTANCE_CREATE from ``gnt-instance add``'s options, or with
    ``mode="import"`` from ``gnt-backup import``'s (GenericInstanceCreate)."""
    forthcoming, commit = getattr(opts, "forthcoming", False), getattr(opts, "commit", False)
    if forthcoming and commit:
        raise _invalid("Creating an instance only forthcoming and commiting it are mutally"
                       " exclusive")  # fmt: skip
    pnode, _, snode = (opts.node or "").partition(":")
    hypervisor, hvparams = opts.hypervisor or (None, {})
    nics = nics_from(opts.nics) if opts.nics else ([] if opts.no_nics or mode != "create" else [{}])
    disks = disks_from(opts, mode)
    T.force_dict_type(opts.beparams, T.BE_PARAMETER_TYPES)
    T.force_dict_type(hvparams, T.HV_PARAMETER_TYPES)
    return {
        "OP_ID": "OP_INSTANCE_CREATE",
        "forthcoming": forthcoming,
        "commit": commit,
        "instance_name": name,
        "disks": disks,
        "disk_template": opts.disk_template,
        "group_name": opts.nodegroup,
        "nics": nics,
        "conflicts_check": opts.conflicts_check,
        "pnode": pnode or None,
        "snode": snode or None,
        "ip_check": opts.ip_check,
        "name_check": opts.name_check,
        "wait_for_sync": opts.wait_for_sync,
        "file_storage_dir": opts.file_storage_dir,
        "file_driver": opts.file_driver,
        "iallocator": opts.iallocator,
        "hypervisor": hypervisor,
        "hvparams": hvparams,
        "beparams": opts.beparams,
        "osparams": with_safe_install(opts.osparams, opts) if mode == "create" else opts.osparams,
        "osparams_private": opts.osparams_private,
        "osparams_secret": opts.osparams_secret,
        "mode": mode,
        "opportunistic_locking": opts.opportunistic_locking,
        **_mode_fields(opts, mode),
        "tags": opts.tags.split(",") if opts.tags is not None else [],
        "ignore_ipolicy": opts.ignore_ipolicy,
        "helper_startup_timeout": opts.helper_startup_timeout,
        "helper_shutdown_timeout": opts.helper_shutdown_timeout,
    }


# modify
def device_changes(mods: list[tuple[str, Any]]) -> list[list[Any]]:
    """``--disk``/``--net`` of modify as ``[action, index, params]`` entries
    (Ganeti's _ConvertNicDiskModifications)."""
    out: list[list[Any]] = []
    for identifier, given in mods:
        index: Any
        params = dict(given) if isinstance(given, dict) else given
        if identifier in ("add", "attach", "remove", "detach"):
            action, index = identifier, -1
        else:
            chosen = [a for a in _DEVICE_ACTIONS if params.pop(a, None) is not None]
            if len(chosen) > 1:
                raise _invalid(
                    "Cannot do more than one of the following operations at the same time:"
                    f" {', '.join(_DEVICE_ACTIONS)}"
                )
            action, index = (chosen[0] if chosen else "modify"), identifier
        if action in ("remove", "detach") and params:
            raise _invalid("Not accepting parameters on removal/detach")
        out.append([action, index, params])
    return out


def _disk_sizes(mods: list[list[Any]]) -> list[list[Any]]:
    for action, _, params in mods:
        if params and "spindles" in params:
            params["spindles"] = int(params["spindles"])
        if params and "size" in params:
            params["size"] = parse_unit(params["size"])
        elif action == "add":
            raise _invalid("Missing required parameter 'size'")
    return mods


def _defaults(values: dict[str, Any], types: dict[str, str]) -> dict[str, Any]:
    """``default`` (any case) as Ganeti's "reset to the default" value."""
    values = {k: "default" if isinstance(v, str) and v.lower() == "default" else v
              for k, v in values.items()}  # fmt: skip
    T.force_dict_type(values, types, allowed=("default",))
    return values


def modify_opcode(opts: argparse.Namespace, name: str) -> dict[str, Any] | None:
    """OP_INSTANCE_SET_PARAMS from ``gnt-instance modify``'s options (None: nothing
    to change)."""
    if not (opts.nics or opts.disks or opts.disk_template or opts.hvparams or opts.beparams
            or opts.os or opts.osparams or opts.osparams_private or opts.offline_inst
            or opts.online_inst or opts.runtime_mem or opts.new_primary_node
            or opts.instance_communication is not None):  # fmt: skip
        return None
    beparams = _defaults(opts.beparams, T.BE_PARAMETER_TYPES)
    hvparams = _defaults(opts.hvparams, T.HV_PARAMETER_TYPES)
    offline = True if opts.offline_inst else (False if opts.online_inst else None)
    return {
        "OP_ID": "OP_INSTANCE_SET_PARAMS",
        "instance_name": name,
        "nics": device_changes(opts.nics),
        "disks": _disk_sizes(device_changes(opts.disks)),
        "hotplug": opts.hotplug,
        "hotplug_if_possible": opts.hotplug_if_possible,
        "disk_template": opts.disk_template,
        "ext_params": opts.ext_params,
        "file_driver": opts.file_driver,
        "file_storage_dir": opts.file_storage_dir,
        "remote_node": opts.node,
        "pnode": opts.new_primary_node,
        "hvparams": hvparams,
        "beparams": beparams,
        "runtime_mem": opts.runtime_mem,
        "os_name": opts.os,
        "osparams": opts.osparams,
        "osparams_private": opts.osparams_private,
        "force_variant": opts.force_variant,
        "force": opts.force,
        "wait_for_sync": opts.wait_for_sync,
        "offline": offline,
        "conflicts_check": opts.conflicts_check,
        "ignore_ipolicy": opts.ignore_ipolicy,
        "instance_communication": opts.instance_communication,
        "iallocator": opts.iallocator,
    }
