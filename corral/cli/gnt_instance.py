"""gnt-instance: add, remove, startup, shutdown, reboot, reinstall, rename, modify,
grow-disk, info, list, list-fields and the instances' tags."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from corral import constants as C
from corral import errors
from corral.cli import common
from corral.cli import instance_specs as S
from corral.cli.errors_fmt import ConfirmationDeclined
from corral.cli.instance_info import instance_info_lines
from corral.cli.table import Formatter, generic_list, generic_list_fields, names_filter
from corral.query.qlang import parse_filter

DEFAULT_FIELDS = ["name", "hypervisor", "os", "pnode", "status", "oper_ram"]
# List fields that Ganeti's gnt-instance list prints joined with ",".
COMMA_FIELDS = (
    "tags",
    "disk.sizes",
    "nic.macs",
    "nic.ips",
    "nic.modes",
    "nic.links",
    "nic.bridges",
    "nic.networks",
    "snodes",
    "snodes.group",
    "snodes.group.uuid",
)


def _submit(opts: argparse.Namespace, op: dict[str, Any]) -> Any:
    return common.submit_or_send(opts, op)


def cmd_add(opts: argparse.Namespace) -> int:
    hypervisor, hvparams = S.hv_params(opts.hypervisor_parameters)
    op: dict[str, Any] = {
        "OP_ID": "OP_INSTANCE_CREATE",
        "instance_name": opts.instance,
        "mode": "create",
        "disk_template": opts.disk_template,
        "disks": S.disks_for_add(opts.disk, opts.os_size),
        "nics": S.nics_for_add(opts.net, opts.no_nics),
        "beparams": common.parse_kv(opts.backend_parameters or ""),
        "hvparams": hvparams,
        "osparams": S.os_params(opts.os_parameters),
        "osparams_private": S.os_params(opts.os_parameters_private),
        "osparams_secret": S.os_params(opts.os_parameters_secret),
        "name_check": opts.name_check,
        "ip_check": opts.ip_check and opts.name_check,
        "conflicts_check": opts.conflicts_check,
        "start": opts.start,
        "no_install": opts.no_install,
        "force_variant": opts.force_variant,
        "tags": opts.tags.split(",") if opts.tags else [],
    }
    if hypervisor:
        op["hypervisor"] = hypervisor
    for key, value in (
        ("os_type", opts.os),
        ("pnode", opts.node),
        ("file_storage_dir", opts.file_storage_dir),
        ("file_driver", opts.file_driver),
    ):
        if value:
            op[key] = value
    _submit(opts, op)
    return C.EXIT_SUCCESS


def _confirm(opts: argparse.Namespace, question: str) -> None:
    if not getattr(opts, "force", False) and not common.confirm(question):
        raise ConfirmationDeclined()


def cmd_remove(opts: argparse.Namespace) -> int:
    _confirm(
        opts,
        f"This will remove the volumes of the instance {opts.instance} (including"
        " mirrors), thus removing all the data of the instance. Continue?",
    )
    _submit(
        opts,
        {
            "OP_ID": "OP_INSTANCE_REMOVE",
            "instance_name": opts.instance,
            "ignore_failures": opts.ignore_failures,
            "shutdown_timeout": opts.shutdown_timeout,
        },
    )
    return C.EXIT_SUCCESS


def _each(opts: argparse.Namespace, make: Any) -> int:
    for name in opts.instances:
        _submit(opts, make(name))
    return C.EXIT_SUCCESS


def cmd_startup(opts: argparse.Namespace) -> int:
    _, hvparams = S.hv_params(opts.hypervisor_parameters)
    return _each(
        opts,
        lambda name: {
            "OP_ID": "OP_INSTANCE_STARTUP",
            "instance_name": name,
            "force": opts.force,
            "no_remember": opts.no_remember,
            "startup_paused": opts.paused,
            "hvparams": hvparams,
            "beparams": common.parse_kv(opts.backend_parameters or ""),
        },
    )


def cmd_shutdown(opts: argparse.Namespace) -> int:
    return _each(
        opts,
        lambda name: {
            "OP_ID": "OP_INSTANCE_SHUTDOWN",
            "instance_name": name,
            "timeout": opts.timeout,
            "no_remember": opts.no_remember,
        },
    )


def cmd_reboot(opts: argparse.Namespace) -> int:
    return _each(
        opts,
        lambda name: {
            "OP_ID": "OP_INSTANCE_REBOOT",
            "instance_name": name,
            "reboot_type": opts.type,
            "ignore_secondaries": opts.ignore_secondaries,
            "shutdown_timeout": opts.shutdown_timeout,
        },
    )


def cmd_reinstall(opts: argparse.Namespace) -> int:
    change = f"change the OS to '{opts.os}'" if opts.os else "keep the same OS"
    _confirm(
        opts,
        f"This will reinstall the instance '{opts.instance}' ({change}) which removes all data."
        " Continue?",
    )
    op: dict[str, Any] = {
        "OP_ID": "OP_INSTANCE_REINSTALL",
        "instance_name": opts.instance,
        "force_variant": opts.force_variant,
    }
    if opts.os:
        op["os_type"] = opts.os
    for key, value in (
        ("osparams", opts.os_parameters),
        ("osparams_private", opts.os_parameters_private),
        ("osparams_secret", opts.os_parameters_secret),
    ):
        if value:
            op[key] = S.os_params(value)
    _submit(opts, op)
    return C.EXIT_SUCCESS


def cmd_rename(opts: argparse.Namespace) -> int:
    new_name = _submit(
        opts,
        {
            "OP_ID": "OP_INSTANCE_RENAME",
            "instance_name": opts.instance,
            "new_name": opts.new_name,
            "name_check": opts.name_check,
            "ip_check": opts.ip_check and opts.name_check,
        },
    )
    print(f"Instance '{opts.instance}' renamed to '{new_name}'")
    return C.EXIT_SUCCESS


def cmd_modify(opts: argparse.Namespace) -> int:
    _, hvparams = S.hv_params(opts.hypervisor_parameters)
    op: dict[str, Any] = {
        "OP_ID": "OP_INSTANCE_SET_PARAMS",
        "instance_name": opts.instance,
        "force_variant": opts.force_variant,
        "disks": S.modifications(opts.disk, "disk"),
        "nics": S.modifications(opts.net, "NIC"),
        "beparams": common.parse_kv(opts.backend_parameters or ""),
        "hvparams": hvparams,
    }
    if opts.os_type:
        op["os_name"] = opts.os_type
    if opts.os_parameters:
        op["osparams"] = S.os_params(opts.os_parameters)
    if opts.os_parameters_private:
        op["osparams_private"] = S.os_params(opts.os_parameters_private)
    if opts.offline is not None:
        op["offline"] = opts.offline
    if not opts.conflicts_check:
        op["conflicts_check"] = False
    changes = (
        "disks",
        "nics",
        "beparams",
        "hvparams",
        "os_name",
        "osparams",
        "osparams_private",
        "offline",
    )
    if not any(op.get(key) not in (None, [], {}) for key in changes):
        print("Please give at least one of the parameters.", file=sys.stderr)
        return C.EXIT_FAILURE
    result = _submit(opts, op)
    print(f"Modified instance {opts.instance}")
    for name, value in result or []:
        print(f" - {name:<5} -> {value}")
    print(
        "Please don't forget that most parameters take effect only at the next (re)start of"
        " the instance initiated by ganeti; restarting from within the instance will not be"
        " enough."
    )
    return C.EXIT_SUCCESS


def cmd_grow_disk(opts: argparse.Namespace) -> int:
    try:
        disk = int(opts.disk)
    except ValueError:
        raise errors.OpPrereqError(f"Invalid disk index '{opts.disk}'", C.ECODE_INVAL) from None
    _submit(
        opts,
        {
            "OP_ID": "OP_INSTANCE_GROW_DISK",
            "instance_name": opts.instance,
            "disk": disk,
            "amount": S.parse_size(opts.amount, "amount"),
            "absolute": opts.absolute,
        },
    )
    return C.EXIT_SUCCESS


def cmd_info(opts: argparse.Namespace) -> int:
    if not opts.instances and not opts.all:
        print(
            "No instance selected. Please pass in --all if you want to query all instances.\n"
            "Note that this can take a long time on a big cluster.",
            file=sys.stderr,
        )
        return C.EXIT_FAILURE
    if opts.instances and opts.all:
        print("Cannot use --all if you specify instance names.", file=sys.stderr)
        return C.EXIT_FAILURE
    result = _submit(
        opts,
        {"OP_ID": "OP_INSTANCE_QUERY_DATA", "instances": opts.instances, "static": opts.static},
    )
    if not result:
        print("No instances.")
    for name in sorted(result):
        print("\n".join(instance_info_lines(result[name])))
    return C.EXIT_SUCCESS


def cmd_list(opts: argparse.Namespace) -> int:
    fields = common.output_fields(opts, DEFAULT_FIELDS)
    qfilter = names_filter("name", opts.names)
    if opts.filter:
        extra = parse_filter(opts.filter)
        qfilter = ["&", qfilter, extra] if qfilter else extra
    formatters: dict[str, Formatter] = dict.fromkeys(COMMA_FIELDS, _comma_list)
    return generic_list(common.get_client(), C.QR_INSTANCE, fields, qfilter, opts, formatters)


def _comma_list(value: Any) -> str:
    return ",".join(str(item) for item in value)


def cmd_list_fields(opts: argparse.Namespace) -> int:
    return generic_list_fields(common.get_client(), C.QR_INSTANCE, opts.fields, opts)


def cmd_list_tags(opts: argparse.Namespace) -> int:
    for tag in sorted(common.get_client().call("QueryTags", C.TAG_INSTANCE, opts.instance)):
        print(tag)
    return C.EXIT_SUCCESS


def _tags(opts: argparse.Namespace, op_id: str, empty: str) -> int:
    if not opts.tags:
        raise errors.OpPrereqError(empty, C.ECODE_INVAL)
    _submit(
        opts, {"OP_ID": op_id, "kind": C.TAG_INSTANCE, "name": opts.instance, "tags": opts.tags}
    )
    return C.EXIT_SUCCESS


def cmd_add_tags(opts: argparse.Namespace) -> int:
    return _tags(opts, "OP_TAGS_SET", "No tags to be added")


def cmd_remove_tags(opts: argparse.Namespace) -> int:
    return _tags(opts, "OP_TAGS_DEL", "No tags to be removed")


def _os_param_options(p: argparse.ArgumentParser, secret: bool = True) -> None:
    p.add_argument("-O", "--os-parameters", help="OS parameters (k=v,...; -k removes)")
    p.add_argument("--os-parameters-private", help="Private OS parameters (shown redacted)")
    if secret:
        p.add_argument("--os-parameters-secret", help="Secret OS parameters (never stored)")


def _add_add(sub: Any) -> None:
    p = common.add_command(sub, "add", cmd_add, "Creates and adds a new instance")
    p.add_argument("instance", metavar="INSTANCE_NAME")
    p.add_argument("-t", "--disk-template", required=True)
    p.add_argument("--disk", action="append", help="N:size=VAL[,mode=ro|rw,name=NAME]")
    p.add_argument("-s", "--os-size", help="Size of the single disk")
    p.add_argument("--net", action="append", help="N:mac=,ip=,mode=,link=,name=")
    p.add_argument("--no-nics", action="store_true")
    p.add_argument("-o", "--os-type", dest="os", help="OS[+variant]")
    _os_param_options(p)
    p.add_argument("-B", "--backend-parameters")
    p.add_argument("-H", "--hypervisor-parameters", action="append")
    p.add_argument("-n", "--node", help="Primary node")
    p.add_argument("--name-check", dest="name_check", action="store_true", default=True)
    p.add_argument("--no-name-check", dest="name_check", action="store_false")
    p.add_argument("--ip-check", dest="ip_check", action="store_true", default=True)
    p.add_argument("--no-ip-check", dest="ip_check", action="store_false")
    p.add_argument("--no-conflicts-check", dest="conflicts_check", action="store_false")
    p.add_argument("--no-start", dest="start", action="store_false")
    p.add_argument("--no-install", action="store_true")
    p.add_argument("--force-variant", action="store_true")
    p.add_argument("--tags", help="Comma-separated tags")
    p.add_argument("--file-storage-dir")
    p.add_argument("--file-driver", choices=["loop", "blktap", "blktap2"])
    common.add_submit_options(p)


def _add_lifecycle(sub: Any) -> None:
    p = common.add_command(sub, "remove", cmd_remove, "Removes an instance")
    p.add_argument("instance", metavar="INSTANCE")
    common.add_force(p)
    p.add_argument("--ignore-failures", action="store_true")
    p.add_argument("--shutdown-timeout", type=int, default=120)
    common.add_submit_options(p)
    p = common.add_command(sub, "startup", cmd_startup, "Starts instances", aliases=["start"])
    p.add_argument("instances", nargs="+", metavar="INSTANCE")
    common.add_force(p)
    p.add_argument("--paused", action="store_true")
    p.add_argument("--no-remember", action="store_true")
    p.add_argument("-H", "--hypervisor-parameters", action="append")
    p.add_argument("-B", "--backend-parameters")
    common.add_submit_options(p)
    p = common.add_command(sub, "shutdown", cmd_shutdown, "Stops instances", aliases=["stop"])
    p.add_argument("instances", nargs="+", metavar="INSTANCE")
    p.add_argument("--timeout", type=int, default=120)
    p.add_argument("--no-remember", action="store_true")
    common.add_force(p)
    common.add_submit_options(p)
    p = common.add_command(sub, "reboot", cmd_reboot, "Reboots instances")
    p.add_argument("instances", nargs="+", metavar="INSTANCE")
    p.add_argument("-t", "--type", choices=["soft", "hard", "full"], default="hard")
    p.add_argument("--ignore-secondaries", action="store_true")
    p.add_argument("--shutdown-timeout", type=int, default=120)
    common.add_force(p)
    common.add_submit_options(p)
    p = common.add_command(sub, "reinstall", cmd_reinstall, "Reinstalls an instance")
    p.add_argument("instance", metavar="INSTANCE")
    p.add_argument("-o", "--os-type", dest="os")
    _os_param_options(p)
    p.add_argument("--force-variant", action="store_true")
    common.add_force(p)
    common.add_submit_options(p)
    p = common.add_command(sub, "rename", cmd_rename, "Renames an instance")
    p.add_argument("instance", metavar="INSTANCE")
    p.add_argument("new_name", metavar="NEW_NAME")
    p.add_argument("--name-check", dest="name_check", action="store_true", default=True)
    p.add_argument("--no-name-check", dest="name_check", action="store_false")
    p.add_argument("--ip-check", dest="ip_check", action="store_true", default=False)
    p.add_argument("--no-ip-check", dest="ip_check", action="store_false")
    common.add_submit_options(p)


def _add_modify(sub: Any) -> None:
    p = common.add_command(sub, "modify", cmd_modify, "Changes an instance's parameters")
    p.add_argument("instance", metavar="INSTANCE")
    p.add_argument("-B", "--backend-parameters")
    p.add_argument("-H", "--hypervisor-parameters", action="append")
    _os_param_options(p, secret=False)
    p.add_argument("-o", "--os-type")
    p.add_argument("--force-variant", action="store_true")
    p.add_argument("--disk", action="append", help="add:size=..|N:remove|N:modify,mode=..")
    p.add_argument("--net", action="append", help="add:..|N:remove|N:modify,..")
    p.add_argument("--offline", dest="offline", action="store_true", default=None)
    p.add_argument("--online", dest="offline", action="store_false")
    p.add_argument("--no-conflicts-check", dest="conflicts_check", action="store_false")
    common.add_submit_options(p)
    p = common.add_command(sub, "grow-disk", cmd_grow_disk, "Grows an instance's disk")
    p.add_argument("instance", metavar="INSTANCE")
    p.add_argument("disk", metavar="DISK")
    p.add_argument("amount", metavar="AMOUNT")
    p.add_argument("--absolute", action="store_true")
    common.add_submit_options(p)


def _add_queries(sub: Any) -> None:
    p = common.add_command(
        sub, "info", cmd_info, "Shows information on instances", aliases=["show"]
    )
    p.add_argument("instances", nargs="*", metavar="INSTANCE")
    p.add_argument("-s", "--static", action="store_true")
    p.add_argument("--all", action="store_true")
    p = common.add_command(sub, "list", cmd_list, "Lists the instances and their status")
    common.add_list_options(p)
    p.add_argument("--units", help="Units (h, m, g, t)")
    p.add_argument("-F", "--filter", help="Query filter")
    p.add_argument("names", nargs="*", metavar="INSTANCE")
    p = common.add_command(sub, "list-fields", cmd_list_fields, "Lists all available fields")
    common.add_list_options(p, verbose=False)
    p.add_argument("fields", nargs="*")
    common.add_command(sub, "list-tags", cmd_list_tags, "List an instance's tags").add_argument(
        "instance", metavar="INSTANCE"
    )
    for name, handler, text in (
        ("add-tags", cmd_add_tags, "Add tags to an instance"),
        ("remove-tags", cmd_remove_tags, "Remove tags from an instance"),
    ):
        p = common.add_command(sub, name, handler, text)
        p.add_argument("instance", metavar="INSTANCE")
        p.add_argument("tags", nargs="*", metavar="TAG")
        common.add_submit_options(p)


def build_parser() -> common.Parser:
    parser, sub = common.make_parser("gnt-instance", "Manage instances")
    _add_add(sub)
    _add_lifecycle(sub)
    _add_modify(sub)
    _add_queries(sub)
    return parser


main, cli = common.entry_points(build_parser)


if __name__ == "__main__":
    cli()
