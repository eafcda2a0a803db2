"""gnt-instance: add, remove, startup, shutdown, reboot, reinstall, rename, modify,
grow-disk, info, list, list-fields and the instances' tags."""

from __future__ import annotations

import argparse
import sys

from corral import constants as C
from corral import errors
from corral.cli import common, instance_disks, tags
from corral.cli import instance_multi as M
from corral.cli import instance_specs as S
from corral.cli.generic_info import format_generic_info
from corral.cli.instance_console import add_command as add_console_command
from corral.cli.instance_copy import add_command as add_copy_command
from corral.cli.instance_info import instance_info
from corral.cli.instance_moves import add_commands as add_move_commands
from corral.cli.table import add_filter_option, generic_list, generic_list_fields, list_filter

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

    from corral.cli.table import Formatter

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
    (name,) = opts.instance
    _submit(opts, S.create_opcode(opts, name))
    return C.EXIT_SUCCESS


def cmd_remove(opts: argparse.Namespace) -> int:
    (name,) = opts.instance
    # Ganeti's client checks the name with a classic query first, which
    # answers nothing for an unknown name: the job says it is unknown.
    if not opts.force:
        question = (
            f"This will remove the volumes of the instance {name} (including mirrors), thus"
            " removing all the data of the instance. Continue?"
        )
        if not common.confirm(question):
            return C.EXIT_FAILURE
    op = {
        "OP_ID": "OP_INSTANCE_REMOVE",
        "instance_name": name,
        "ignore_failures": opts.ignore_failures,
        "shutdown_timeout": opts.shutdown_timeout,
    }
    _submit(opts, op)
    return C.EXIT_SUCCESS


def _startup_op(name: str, opts: argparse.Namespace) -> dict[str, Any]:
    op: dict[str, Any] = {
        "OP_ID": "OP_INSTANCE_STARTUP",
        "instance_name": name,
        "force": opts.force,
        "ignore_offline_nodes": opts.ignore_offline,
        "no_remember": opts.no_remember,
        "startup_paused": opts.startup_paused,
    }
    # As Ganeti: only given when given.
    if opts.hvparams:
        op["hvparams"] = opts.hvparams
    if opts.beparams:
        op["beparams"] = opts.beparams
    return op


def _shutdown_op(name: str, opts: argparse.Namespace) -> dict[str, Any]:
    return {
        "OP_ID": "OP_INSTANCE_SHUTDOWN",
        "instance_name": name,
        "force": opts.force,
        "timeout": opts.timeout,
        "ignore_offline_nodes": opts.ignore_offline,
        "no_remember": opts.no_remember,
    }


def _reboot_op(name: str, opts: argparse.Namespace) -> dict[str, Any]:
    return {
        "OP_ID": "OP_INSTANCE_REBOOT",
        "instance_name": name,
        "reboot_type": opts.reboot_type,
        "ignore_secondaries": opts.ignore_secondaries,
        "shutdown_timeout": opts.shutdown_timeout,
    }


def cmd_startup(opts: argparse.Namespace) -> int:
    return M.many_ops(opts, "startup", _startup_op)


def cmd_shutdown(opts: argparse.Namespace) -> int:
    return M.many_ops(opts, "shutdown", _shutdown_op)


def cmd_reboot(opts: argparse.Namespace) -> int:
    return M.many_ops(opts, "reboot", _reboot_op)


def cmd_reinstall(opts: argparse.Namespace) -> int:
    def make_op(name: str) -> dict[str, Any]:
        return {
            "OP_ID": "OP_INSTANCE_REINSTALL",
            "instance_name": name,
            "os_type": opts.os,
            "force_variant": opts.force_variant,
            "osparams": S.with_safe_install(opts.osparams, opts),
            "osparams_private": opts.osparams_private,
            "osparams_secret": opts.osparams_secret,
        }

    return M.reinstall(opts, make_op)


def cmd_rename(opts: argparse.Namespace) -> int:
    old, new = opts.names
    if not opts.force and not opts.name_check:
        question = (
            "As you disabled the check of the DNS entry, please verify that"
            f" '{new}' is a FQDN. Continue?"
        )
        if not common.confirm(question):
            return C.EXIT_FAILURE
    op = {
        "OP_ID": "OP_INSTANCE_RENAME",
        "instance_name": old,
        "new_name": new,
        "ip_check": opts.ip_check,
        "name_check": opts.name_check,
    }
    result = _submit(opts, op)
    if result:
        print(f"Instance '{old}' renamed to '{result}'")
    return C.EXIT_SUCCESS


def cmd_modify(opts: argparse.Namespace) -> int:
    (name,) = opts.instance
    op = S.modify_opcode(opts, name)
    if op is None:
        print("Please give at least one of the parameters.", file=sys.stderr)
        return C.EXIT_FAILURE
    result = _submit(opts, op)
    if result:
        print(f"Modified instance {name}")
        for param, data in result:
            print(f" - {param:<5} -> {data}")
        print(
            "Please don't forget that most parameters take effect only at the next (re)start"
            " of the instance initiated by ganeti; restarting from within the instance will"
            " not be enough."
        )
        if opts.hvparams:
            print(
                "Note that changing hypervisor parameters without performing a restart might"
                " lead to a crash while performing a live migration. This will be addressed"
                " in future Ganeti versions."
            )
    return C.EXIT_SUCCESS


def cmd_grow_disk(opts: argparse.Namespace) -> int:
    name, disk_text, amount_text = opts.args
    try:
        disk = int(disk_text)
    except ValueError as err:
        raise errors.OpPrereqError(f"Invalid disk index: {err}", C.ECODE_INVAL) from None
    try:
        amount = S.parse_unit(amount_text)
    except errors.UnitParseError:
        raise errors.OpPrereqError(
            f"Can't parse the given amount '{amount_text}'", C.ECODE_INVAL
        ) from None
    op = {
        "OP_ID": "OP_INSTANCE_GROW_DISK",
        "instance_name": name,
        "disk": disk,
        "amount": amount,
        "wait_for_sync": opts.wait_for_sync,
        "absolute": opts.absolute,
        "ignore_ipolicy": opts.ignore_ipolicy,
    }
    _submit(opts, op)
    return C.EXIT_SUCCESS


def cmd_info(opts: argparse.Namespace) -> int:
    if not opts.instances and not opts.show_all:
        print(
            "No instance selected. Please pass in --all if you want to query all instances.\n"
            "Note that this can take a long time on a big cluster.",
            file=sys.stderr,
        )
        return C.EXIT_FAILURE
    if opts.instances and opts.show_all:
        print("Cannot use --all if you specify instance names.", file=sys.stderr)
        return C.EXIT_FAILURE
    op = {
        "OP_ID": "OP_INSTANCE_QUERY_DATA",
        "instances": opts.instances,
        "static": opts.static,
        "use_locking": not opts.static,
    }
    result = _submit(opts, op)
    if not result:
        print("No instances.")
        return C.EXIT_FAILURE
    print(format_generic_info([instance_info(data) for data in result.values()]))
    return C.EXIT_SUCCESS


def cmd_list(opts: argparse.Namespace) -> int:
    fields = common.output_fields(opts, DEFAULT_FIELDS)
    qfilter = list_filter(opts, opts.names)
    formatters: dict[str, Formatter] = dict.fromkeys(COMMA_FIELDS, _comma_list)
    return generic_list(common.get_client(), C.QR_INSTANCE, fields, qfilter, opts, formatters)


def _comma_list(value: Any) -> str:
    return ",".join(str(item) for item in value)


def cmd_list_fields(opts: argparse.Namespace) -> int:
    return generic_list_fields(common.get_client(), C.QR_INSTANCE, opts.fields, opts)


def _add_lifecycle(sub: Any) -> None:
    p = common.add_command(sub, "remove", cmd_remove, "Shuts down the instance and removes it")
    common.add_args(p, "instance", "INSTANCE", 1, 1)
    common.add_force(p)
    p.add_argument("--ignore-failures", action="store_true")
    p.add_argument("--shutdown-timeout", type=int, default=C.DEFAULT_SHUTDOWN_TIMEOUT)
    common.add_submit_options(p)
    p = common.add_command(sub, "startup", cmd_startup, "Starts an instance", aliases=["start"])
    _many(p)
    p.add_argument("--paused", dest="startup_paused", action="store_true")
    p.add_argument("-H", "--hypervisor-parameters", dest="hvparams", type=S.key_val("-H"),
                   default={})  # fmt: skip
    p.add_argument("-B", "--backend-parameters", dest="beparams", type=S.key_val("-B"),
                   default={})  # fmt: skip
    p = common.add_command(sub, "shutdown", cmd_shutdown, "Stops an instance", aliases=["stop"])
    _many(p)
    p.add_argument("--timeout", type=int, default=C.DEFAULT_SHUTDOWN_TIMEOUT)
    p = common.add_command(sub, "reboot", cmd_reboot, "Reboots an instance")
    _many(p, force=False, offline=False)
    p.add_argument("-t", "--type", dest="reboot_type", choices=["soft", "hard", "full"],
                   default="hard")  # fmt: skip
    p.add_argument("--ignore-secondaries", action="store_true")
    p.add_argument("--shutdown-timeout", type=int, default=C.DEFAULT_SHUTDOWN_TIMEOUT)
    p = common.add_command(sub, "reinstall", cmd_reinstall, "Reinstall a stopped instance")
    common.add_args(p, "instances", "INSTANCE", 0, None)
    M.add_selection_options(p)
    common.add_force(p)
    p.add_argument("-o", "--os-type", dest="os")
    p.add_argument("--select-os", action="store_true")
    S.add_os_parameter_options(p)
    p.add_argument("--force-variant", action="store_true")
    S.add_safe_install_option(p)
    common.add_submit_options(p)
    p = common.add_command(sub, "rename", cmd_rename, "Rename the instance")
    common.add_args(p, "names", "NAME", 2, 2)
    common.add_force(p)
    p.add_argument("--no-name-check", dest="name_check", action="store_false")
    p.add_argument("--no-ip-check", dest="ip_check", action="store_false")
    common.add_submit_options(p)


def _many(p: argparse.ArgumentParser, force: bool = True, offline: bool = True) -> None:
    """The options of the commands that act on a selection of instances."""
    common.add_args(p, "instances", "INSTANCE", 0, None)
    M.add_selection_options(p)
    if force:
        common.add_force(p)
    if offline:
        p.add_argument("--ignore-offline", action="store_true")
        p.add_argument("--no-remember", action="store_true")
    common.add_submit_options(p)


def _add_modify(sub: Any) -> None:
    p = common.add_command(sub, "modify", cmd_modify, "Alters the parameters of an instance")
    common.add_args(p, "instance", "INSTANCE", 1, 1)
    S.add_modify_options(p)
    common.add_force(p)
    S.add_os_parameter_options(p, secret=False)
    common.add_submit_options(p)
    p = common.add_command(sub, "grow-disk", cmd_grow_disk, "Grow an instance's disk")
    common.add_args(p, "args", "INSTANCE DISK AMOUNT", 3, 3)
    p.add_argument("--absolute", action="store_true")
    p.add_argument("--no-wait-for-sync", dest="wait_for_sync", action="store_false")
    p.add_argument("--ignore-ipolicy", action="store_true")
    common.add_submit_options(p)


def _add_queries(sub: Any) -> None:
    p = common.add_command(
        sub, "info", cmd_info, "Show information on the specified instance(s)", aliases=["show"]
    )
    common.add_args(p, "instances", "INSTANCE", 0, None)
    p.add_argument("-s", "--static", action="store_true")
    p.add_argument("--all", dest="show_all", action="store_true")
    common.add_priority_option(p)
    p = common.add_command(sub, "list", cmd_list, "Lists the instances and their status")
    common.add_list_options(p)
    p.add_argument("--units", help="Units (h, m, g, t)")
    add_filter_option(p)
    common.add_args(p, "names", "INSTANCE", 0, None)
    p = common.add_command(sub, "list-fields", cmd_list_fields, "Lists all available fields")
    common.add_list_options(p, verbose=False)
    common.add_args(p, "fields", "FIELD", 0, None)
    tags.add_tag_commands(sub, C.TAG_INSTANCE, "INSTANCE", "instance")


def build_parser() -> common.Parser:
    parser, sub = common.make_parser("gnt-instance", "Manage instances")
    p = common.add_command(sub, "add", cmd_add, "Creates and adds a new instance to the cluster")
    common.add_args(p, "instance", "INSTANCE_NAME", 1, 1)
    S.add_create_options(p)
    common.add_submit_options(p)
    _add_lifecycle(sub)
    _add_modify(sub)
    _add_queries(sub)
    add_move_commands(sub)
    add_copy_command(sub)
    add_console_command(sub)
    instance_disks.add_commands(sub)
    common.add_not_built(
        sub,
        "gnt-instance",
        [
            "batch-create",
            "change-group",
        ],
    )
    return parser


main, cli = common.entry_points(build_parser)


if __name__ == "__main__":
    cli()
