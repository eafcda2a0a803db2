"""gnt-node: list, list-fields, info, modify, tags, volumes, list-storage,
modify-storage, repair-storage, powercycle, evacuate, failover, migrate (and
add, remove, join-token from :mod:`corral.cli.node_membership`, power and
health from :mod:`corral.cli.node_power`, list-drbd from
:mod:`corral.cli.node_drbd`)."""

from __future__ import annotations

import argparse
import sys

from corral import constants as C
from corral.cli import common, node_drbd, node_membership, node_moves, node_power, tags
from corral.cli.generic_info import format_generic_info
from corral.cli.instance_specs import ident_key_val, key_val
from corral.cli.ipolicy import format_params_dict_info
from corral.cli.optvalues import boolean
from corral.cli.table import (
    add_filter_option,
    format_table,
    generic_list,
    generic_list_fields,
    list_filter,
)
from corral.nicesort import nice_sort
from corral.paramtypes import format_unit

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

    from corral.cli.table import Formatter

DEFAULT_FIELDS = ["name", "dtotal", "dfree", "mtotal", "mnode", "mfree", "pinst_cnt", "sinst_cnt"]
VOLUME_FIELDS = ["node", "phys", "vg", "name", "size", "instance"]
VOLUME_HEADERS = {"node": "Node", "phys": "PhysDev", "vg": "VG", "name": "Name",
                  "size": "Size", "instance": "Instance"}  # fmt: skip
STORAGE_HEADERS = {"node": "Node", "type": "Type", "name": "Name", "size": "Size",
                   "used": "Used", "free": "Free", "allocatable": "Allocatable"}  # fmt: skip
UNIT_FIELDS = ("size", "used", "free")
USER_STORAGE_TYPES = ("file", "lvm-pv", "lvm-vg", "sharedfile", "gluster")
INFO_FIELDS = ["name", "pip", "sip", "pinst_list", "sinst_list", "master_candidate", "drained",
               "offline", "master_capable", "vm_capable", "powered", "ndparams",
               "custom_ndparams"]  # fmt: skip
NOT_BUILT = ["restricted-command"]


def _comma_list(value: Any) -> str:
    return ",".join(str(item) for item in value)


def cmd_list(opts: argparse.Namespace) -> int:
    fields = common.output_fields(opts, DEFAULT_FIELDS)
    formatters: dict[str, Formatter] = dict.fromkeys(("pinst_list", "sinst_list", "tags"),
                                                     _comma_list)  # fmt: skip
    qfilter = list_filter(opts, opts.names)
    return generic_list(common.get_client(), C.QR_NODE, fields, qfilter, opts, formatters)


def cmd_list_fields(opts: argparse.Namespace) -> int:
    return generic_list_fields(common.get_client(), C.QR_NODE, opts.fields, opts)


def node_info(row: list[Any]) -> list[tuple[str, Any]]:
    """One node as Ganeti's ``gnt-node info`` shows it."""
    (name, pip, sip, pinst, sinst, is_mc, drained, offline, master_capable, vm_capable,
     powered, ndparams, custom_ndparams) = row  # fmt: skip
    info: list[tuple[str, Any]] = [
        ("Node name", name), ("primary ip", pip), ("secondary ip", sip),
        ("master candidate", is_mc), ("drained", drained), ("offline", offline),
    ]  # fmt: skip
    if powered is not None:
        info.append(("powered", powered))
    info += [("master_capable", master_capable), ("vm_capable", vm_capable)]
    if vm_capable:
        info += [("primary for instances", nice_sort(pinst)),
                 ("secondary for instances", nice_sort(sinst))]  # fmt: skip
    info.append(("node parameters", format_params_dict_info(custom_ndparams, ndparams)))
    return info


def cmd_info(opts: argparse.Namespace) -> int:
    rows = common.get_client().call("QueryNodes", opts.nodes, INFO_FIELDS, False)
    text = format_generic_info([node_info(row) for row in rows])
    print(text)  # an empty line when nothing matched, as Ganeti's
    return C.EXIT_SUCCESS


def cmd_modify(opts: argparse.Namespace) -> int:
    changes = [opts.master_candidate, opts.drained, opts.offline, opts.master_capable,
               opts.vm_capable, opts.secondary_ip, opts.ndparams]  # fmt: skip
    if changes.count(None) == len(changes) and not (opts.hv_state or opts.disk_state):
        print("Please give at least one of the parameters.", file=sys.stderr)
        return C.EXIT_FAILURE
    if opts.offline is False and not opts.force:
        question = (
            "You are setting this node online manually. If the configuration has changed,"
            " this can cause issues such as split brain. To safely bring a node back online,"
            " please use --readd instead. If you are confident that the configuration hasn't"
            " changed, continue?"
        )
        if not common.confirm(question):
            return C.EXIT_FAILURE
    (name,) = opts.node
    op = {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": name,
          "master_candidate": opts.master_candidate, "offline": opts.offline,
          "drained": opts.drained, "master_capable": opts.master_capable,
          "vm_capable": opts.vm_capable, "secondary_ip": opts.secondary_ip,
          "force": opts.force, "ndparams": opts.ndparams, "auto_promote": opts.auto_promote,
          "powered": opts.node_powered, "hv_state": dict(opts.hv_state),
          "disk_state": _flat_to_dict(opts.disk_state)}  # fmt: skip
    result = common.submit_or_send(opts, op)
    if result:
        print(f"Modified node {name}")
        for param, data in result:
            print(f" - {param:<5} -> {data}")
    return C.EXIT_SUCCESS


def _flat_to_dict(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return {key: value for key, value in pairs}


def _print_rows(opts: argparse.Namespace, fields: list[str], headers: dict[str, str],
                rows: list[list[Any]]) -> None:  # fmt: skip
    """Rows as Ganeti's GenerateTable prints them, sizes in ``--units``."""
    units = opts.units or ("m" if opts.separator is not None else "h")
    cells = [
        [format_unit(int(v), units) if f in UNIT_FIELDS else str(v)
         for f, v in zip(fields, row, strict=True)]
        for row in rows
    ]  # fmt: skip
    titles = None if opts.no_headers else [headers.get(f, f) for f in fields]
    right = [f in UNIT_FIELDS for f in fields]
    for line in format_table(titles, cells, right, opts.separator):
        print(line)


def cmd_volumes(opts: argparse.Namespace) -> int:
    fields = common.output_fields(opts, VOLUME_FIELDS)
    op = {"OP_ID": "OP_NODE_QUERYVOLS", "nodes": opts.nodes, "output_fields": fields}
    _print_rows(opts, fields, VOLUME_HEADERS, common.submit_or_send(opts, op))
    return C.EXIT_SUCCESS


def cmd_list_storage(opts: argparse.Namespace) -> int:
    fields = common.output_fields(opts, list(STORAGE_HEADERS))
    op = {"OP_ID": "OP_NODE_QUERY_STORAGE", "nodes": opts.nodes,
          "storage_type": opts.user_storage_type, "output_fields": fields}  # fmt: skip
    rows = common.submit_or_send(opts, op)
    for row in rows:
        for index, field in enumerate(fields):
            if field == "allocatable":
                row[index] = "Y" if row[index] else "N"
    _print_rows(opts, fields, STORAGE_HEADERS, rows)
    return C.EXIT_SUCCESS


def cmd_modify_storage(opts: argparse.Namespace) -> int:
    node, storage_type, name = opts.args
    if opts.allocatable is None:
        print("No changes to perform, exiting.", file=sys.stderr)
        return C.EXIT_SUCCESS
    op = {"OP_ID": "OP_NODE_MODIFY_STORAGE", "node_name": node, "storage_type": storage_type,
          "name": name, "changes": {"allocatable": opts.allocatable}}  # fmt: skip
    common.submit_or_send(opts, op)
    return C.EXIT_SUCCESS


def cmd_repair_storage(opts: argparse.Namespace) -> int:
    node, storage_type, name = opts.args
    op = {"OP_ID": "OP_REPAIR_NODE_STORAGE", "node_name": node, "storage_type": storage_type,
          "name": name, "ignore_consistency": opts.ignore_consistency}  # fmt: skip
    common.submit_or_send(opts, op)
    return C.EXIT_SUCCESS


def cmd_powercycle(opts: argparse.Namespace) -> int:
    (node,) = opts.node
    if not opts.confirm and not common.confirm(
        f"Are you sure you want to hard powercycle node {node}?"
    ):
        return 2
    op = {"OP_ID": "OP_NODE_POWERCYCLE", "node_name": node, "force": opts.force}
    result = common.submit_or_send(opts, op)
    if result:
        print(result, file=sys.stderr)
    return C.EXIT_SUCCESS


def _add_queries(sub: Any) -> None:
    p = common.add_command(sub, "list", cmd_list, "Lists the nodes in the cluster")
    common.add_list_options(p)
    p.add_argument("--units", help="Units (h, m, g, t)")
    add_filter_option(p)
    common.add_args(p, "names", "NODE", 0, None)
    p = common.add_command(sub, "list-fields", cmd_list_fields,
                           "Lists all available fields for nodes")  # fmt: skip
    common.add_list_options(p, verbose=False)
    common.add_args(p, "fields", "FIELD", 0, None)
    p = common.add_command(sub, "info", cmd_info, "Show information about the node(s)",
                           aliases=["show"])  # fmt: skip
    common.add_args(p, "nodes", "NODE", 0, None)
    tags.add_tag_commands(sub, C.TAG_NODE, "NODE", "node")


def _add_modify(sub: Any) -> None:
    p = common.add_command(sub, "modify", cmd_modify, "Alters the parameters of a node")
    common.add_args(p, "node", "NODE", 1, 1)
    common.add_force(p)
    for flag, dest in (("-C", "master_candidate"), ("-D", "drained"), ("-O", "offline")):
        p.add_argument(flag, f"--{dest.replace('_', '-')}", dest=dest, type=boolean)
    p.add_argument("--master-capable", type=boolean)
    p.add_argument("--vm-capable", type=boolean)
    p.add_argument("-s", "--secondary-ip")
    p.add_argument("--auto-promote", action="store_true")
    p.add_argument("--node-parameters", dest="ndparams", type=key_val("--node-parameters"))
    p.add_argument("--node-powered", type=boolean)
    p.add_argument("--hypervisor-state", dest="hv_state", action="append",
                   type=ident_key_val("--hypervisor-state"), default=[])  # fmt: skip
    p.add_argument("--disk-state", dest="disk_state", action="append",
                   type=ident_key_val("--disk-state"), default=[])  # fmt: skip
    common.add_submit_options(p)


def _add_storage(sub: Any) -> None:
    p = common.add_command(sub, "volumes", cmd_volumes, "List logical volumes on node(s)")
    common.add_args(p, "nodes", "NODE", 0, None)
    _table_options(p)
    p = common.add_command(sub, "list-storage", cmd_list_storage,
                           "List physical volumes on node(s)")  # fmt: skip
    common.add_args(p, "nodes", "NODE", 0, None)
    _table_options(p)
    p.add_argument("-t", "--storage-type", dest="user_storage_type", choices=USER_STORAGE_TYPES)
    p = common.add_command(sub, "modify-storage", cmd_modify_storage,
                           "Modify storage volume on a node")  # fmt: skip
    common.add_args(p, "args", "NODE STORAGE_TYPE NAME", 3, 3)
    p.add_argument("--allocatable", type=boolean)
    common.add_submit_options(p)
    p = common.add_command(sub, "repair-storage", cmd_repair_storage,
                           "Repairs a storage volume on a node")  # fmt: skip
    common.add_args(p, "args", "NODE STORAGE_TYPE NAME", 3, 3)
    p.add_argument("--ignore-consistency", action="store_true")
    common.add_submit_options(p)
    p = common.add_command(sub, "powercycle", cmd_powercycle,
                           "Tries to forcefully powercycle a node")  # fmt: skip
    common.add_args(p, "node", "NODE", 1, 1)
    common.add_force(p)
    p.add_argument("--yes", dest="confirm", action="store_true")
    common.add_submit_options(p)


def _table_options(p: argparse.ArgumentParser) -> None:
    common.add_list_options(p, verbose=False)
    p.add_argument("--units", help="Units (h, m, g, t)")
    common.add_priority_option(p)


def build_parser() -> common.Parser:
    parser, sub = common.make_parser("gnt-node", "Manage nodes")
    node_membership.add_commands(sub)
    _add_queries(sub)
    _add_modify(sub)
    _add_storage(sub)
    node_moves.add_commands(sub)
    node_power.add_commands(sub)
    node_drbd.add_commands(sub)
    common.add_not_built(sub, "gnt-node", NOT_BUILT)
    return parser


main, cli = common.entry_points(build_parser)


if __name__ == "__main__":
    cli()
