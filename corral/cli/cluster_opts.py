"""``gnt-cluster modify``'s options, parsed as Ganeti 3.0.2's command parses them.

Every option of Ganeti's command is accepted and becomes the same field of
OP_CLUSTER_SET_PARAMS; fields Corral does not implement are refused by the
opcode itself ("not supported by Corral yet"), never silently dropped.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from corral import constants as C
from corral import diskparams, errors
from corral import paramtypes as T
from corral.cli import common
from corral.cli import ipolicy as cli_ipolicy
from corral.cli.optvalues import boolean, split_key_val, unescape_and_split
from corral.uidpool import parse as parse_uid_pool

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

# Ganeti's default compression tools, which an empty --compression-tools restores.
DEFAULT_COMPRESSION_TOOLS = ["gzip", "gzip-fast", "gzip-slow"]
DATA_COLLECTOR_NAMES = (
    "cpu-avg-load",
    "diskstats",
    "drbd",
    "inst-status-xen",
    "lv",
    "xen-cpu-avg-load",
)


def ident_key_vals(opt: str, values: list[str] | None) -> dict[str, Any]:
    """Repeated ``ident:k=v,...`` options as ``{ident: {k: v}}``; ``no_ident`` is
    False and ``-ident`` None, as Ganeti's "identkeyval" type has them."""
    out: dict[str, Any] = {}
    for value in values or []:
        ident, sep, rest = value.partition(":")
        removal = ident.startswith("no_") or (ident.startswith("-") and not ident[1:2].isdigit())
        if removal and rest:
            raise errors.ParameterError(
                f"Cannot pass options when removing parameter groups: {value}"
            )
        if ident.startswith("no_"):
            out[ident[3:]] = False
        elif removal:
            out[ident[1:]] = None
        else:
            out[ident] = split_key_val(opt, rest if sep else "")
    return out


def _keyval(opt: str) -> Callable[[str], dict[str, Any]]:
    return lambda value: split_key_val(opt, value)


# (option strings, opcode field, conversion of the option's text or None).
_PLAIN: list[tuple[tuple[str, ...], str, Callable[[str], Any] | None]] = [
    (("-B", "--backend-parameters"), "beparams", _keyval("-B")),
    (("-C", "--candidate-pool-size"), "candidate_pool_size", int),
    (("--max-running-jobs",), "max_running_jobs", int),
    (("--max-tracked-jobs",), "max_tracked_jobs", int),
    (("--install-image",), "install_image", None),
    (("--instance-communication-network",), "instance_communication_network", None),
    (("-m", "--mac-prefix"), "mac_prefix", None),
    (("--master-netdev",), "master_netdev", None),
    (("-N", "--nic-parameters"), "nicparams", _keyval("-N")),
    (("--vg-name",), "vg_name", None),
    (("--maintain-node-health",), "maintain_node_health", boolean),
    (("--uid-pool",), "uid_pool", parse_uid_pool),
    (("--add-uids",), "add_uids", parse_uid_pool),
    (("--remove-uids",), "remove_uids", parse_uid_pool),
    (("--drbd-usermode-helper",), "drbd_helper", None),
    (("-I", "--default-iallocator"), "default_iallocator", None),
    (
        ("--default-iallocator-params",),
        "default_iallocator_params",
        _keyval("--default-iallocator-params"),
    ),
    (("--prealloc-wipe-disks",), "prealloc_wipe_disks", boolean),
    (("--node-parameters",), "ndparams", _keyval("--node-parameters")),
    (("--use-external-mip-script",), "use_external_mip_script", boolean),
    (("--modify-etc-hosts",), "modify_etc_hosts", boolean),
    (("--user-shutdown",), "enabled_user_shutdown", boolean),
    (("--etcd-members",), "etcd_members", boolean),  # Corral's own
    (("--file-storage-dir",), "file_storage_dir", None),
    (("--shared-file-storage-dir",), "shared_file_storage_dir", None),
    (("--zeroing-image",), "zeroing_image", None),
]
# Repeated ``ident:k=v`` options.
_IDENT: list[tuple[tuple[str, ...], str]] = [
    (("-H", "--hypervisor-parameters"), "hvparams"),
    (("-D", "--disk-parameters"), "diskparams"),
    (("--hypervisor-state",), "hv_state"),
    (("--disk-state",), "disk_state"),
]


def add_modify_options(p: argparse.ArgumentParser) -> None:
    """Every option of Ganeti's ``gnt-cluster modify``."""
    common.add_force(p)
    for flags, field, convert in _PLAIN:
        if convert is int:
            p.add_argument(*flags, dest=field, type=int)
        else:
            p.add_argument(*flags, dest=field)
    for flags, field in _IDENT:
        p.add_argument(*flags, dest=field, action="append")
    p.add_argument("--master-netmask", dest="master_netmask")
    p.add_argument("--enabled-hypervisors", dest="enabled_hypervisors")
    p.add_argument("--enabled-disk-templates", dest="enabled_disk_templates")
    p.add_argument("--reserved-lvs", dest="reserved_lvs")
    p.add_argument("--compression-tools", dest="compression_tools")
    p.add_argument("--enabled-data-collectors", dest="enabled_data_collectors")
    p.add_argument("--data-collector-interval", dest="data_collector_interval")
    cli_ipolicy.add_options(p, init=False)
    common.add_submit_options(p)


def _converted(opts: argparse.Namespace) -> dict[str, Any]:
    op: dict[str, Any] = {}
    for _, field, convert in _PLAIN:
        value = getattr(opts, field)
        if value is not None:
            op[field] = convert(value) if convert and convert is not int else value
            # As Ganeti: an empty -B, -N or --node-parameters asks for nothing.
            if field in ("beparams", "nicparams", "ndparams") and not op[field]:
                del op[field]
    for flags, field in _IDENT:
        values = ident_key_vals(flags[0], getattr(opts, field))
        if values:
            # As Ganeti's command, -D values take their types here.
            op[field] = diskparams.typed(values) if field == "diskparams" else values
    for field in ("enabled_hypervisors", "enabled_disk_templates"):
        if getattr(opts, field):
            op[field] = getattr(opts, field).split(",")
    if opts.reserved_lvs is not None:
        op["reserved_lvs"] = unescape_and_split(opts.reserved_lvs) if opts.reserved_lvs else []
    if opts.compression_tools is not None:
        op["compression_tools"] = (
            opts.compression_tools.split(",")
            if opts.compression_tools
            else DEFAULT_COMPRESSION_TOOLS
        )
    return op


def _data_collectors(opts: argparse.Namespace, op: dict[str, Any]) -> None:
    enabled = split_key_val("--enabled-data-collectors", opts.enabled_data_collectors or "")
    if enabled:
        unknown = [name for name in enabled if name not in DATA_COLLECTOR_NAMES]
        if unknown:
            print(f"Data collector names not recognized: {', '.join(unknown)}", file=sys.stderr)
        op["enabled_data_collectors"] = {
            k: str(v).lower().startswith("t") for k, v in enabled.items()
        }
    intervals = split_key_val("--data-collector-interval", opts.data_collector_interval or "")
    if intervals:
        try:
            op["data_collector_interval"] = {k: int(1e6 * float(v)) for k, v in intervals.items()}
        except (TypeError, ValueError):
            raise _Refused(f"Can't transform all values to integers: {intervals}") from None


def check_types(op: dict[str, Any]) -> None:
    """Ganeti's command checks (and converts) the types of -H, -B and -N
    values before it sends them (ForceDictType: "Parameter Error: ...")."""
    for params in (op.get("hvparams") or {}).values():
        T.force_dict_type(params, T.HV_PARAMETER_TYPES)
    for field, types in (("beparams", T.BE_PARAMETER_TYPES), ("nicparams", T.NIC_PARAMETER_TYPES)):
        if field in op:
            T.force_dict_type(op[field], types)


class _Refused(Exception):
    """A mistake ``modify`` reports on standard error, leaving with code 1."""


def modify_opcode(opts: argparse.Namespace) -> dict[str, Any] | None:
    """OP_CLUSTER_SET_PARAMS for the options; None when they ask for nothing."""
    op = _converted(opts)
    check_types(op)
    if opts.master_netmask is not None:
        try:
            op["master_netmask"] = int(opts.master_netmask)
        except ValueError:
            raise _Refused("The --master-netmask option expects an int parameter.") from None
    _data_collectors(opts, op)
    policy = cli_ipolicy.create_ipolicy(opts, init=False)
    if policy:
        op["ipolicy"] = policy
    if not op:
        return None
    return {"OP_ID": "OP_CLUSTER_SET_PARAMS", "force": opts.force, **op}


def cmd_modify(opts: argparse.Namespace) -> int:
    """``gnt-cluster modify``."""
    try:
        op = modify_opcode(opts)
    except _Refused as err:
        print(err, file=sys.stderr)
        return C.EXIT_FAILURE
    if op is None:
        print("Please give at least one of the parameters.", file=sys.stderr)
        return C.EXIT_FAILURE
    from corral.cli.jobexec import follow_result_jobs

    # Setting the communication network may submit jobs (Ganeti's GetResult).
    return follow_result_jobs(opts, common.submit_or_send(opts, op))
