"""gnt-group: add, remove, rename, list, list-fields, info, modify,
assign-nodes, evacuate, show-ispecs-cmd and the groups' tags."""

from __future__ import annotations

import argparse

from corral import constants as C
from corral.cli import common, tags
from corral.cli import ipolicy as cli_ipolicy
from corral.cli.cluster_opts import ident_key_vals
from corral.cli.generic_info import format_generic_info
from corral.cli.instance_specs import key_val
from corral.cli.table import add_filter_option, generic_list, generic_list_fields, list_filter

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

    from corral.cli.table import Formatter

DEFAULT_FIELDS = ["name", "node_cnt", "pinst_cnt", "alloc_policy", "ndparams"]
ALLOC_POLICIES = ("preferred", "last_resort", "unallocable")
INFO_FIELDS = ["name", "ndparams", "custom_ndparams", "diskparams", "custom_diskparams",
               "ipolicy", "custom_ipolicy"]  # fmt: skip


def _ipolicy(opts: argparse.Namespace) -> dict[str, Any]:
    opts.ipolicy_std_specs = None  # groups have no standard specs
    return cli_ipolicy.create_ipolicy(opts, init=False)


def _states(opts: argparse.Namespace) -> dict[str, Any]:
    return {
        "hv_state": ident_key_vals("--hypervisor-state", opts.hv_state),
        "disk_state": ident_key_vals("--disk-state", opts.disk_state),
    }


def _follow_jobs(opts: argparse.Namespace, result: Any) -> int:
    from corral.cli.jobexec import follow_result_jobs

    return follow_result_jobs(opts, result)


def cmd_add(opts: argparse.Namespace) -> int:
    (name,) = opts.group
    op = {"OP_ID": "OP_GROUP_ADD", "group_name": name, "ndparams": opts.ndparams,
          "alloc_policy": opts.alloc_policy,
          "diskparams": ident_key_vals("-D", opts.diskparams), "ipolicy": _ipolicy(opts),
          **_states(opts)}  # fmt: skip
    return _follow_jobs(opts, common.submit_or_send(opts, op))


def cmd_assign_nodes(opts: argparse.Namespace) -> int:
    group, *nodes = opts.args
    op = {"OP_ID": "OP_GROUP_ASSIGN_NODES", "group_name": group, "nodes": nodes,
          "force": opts.force}  # fmt: skip
    common.submit_or_send(opts, op)
    return C.EXIT_SUCCESS


def _fmt_dict(data: Any) -> str:
    if not data:
        return "(empty)"
    return ", ".join(f"{key}={value}" for key, value in data.items())


def cmd_list(opts: argparse.Namespace) -> int:
    fields = common.output_fields(opts, DEFAULT_FIELDS)
    join = ",".join
    formatters: dict[str, Formatter] = {"node_list": join, "pinst_list": join,
                                        "ndparams": _fmt_dict}  # fmt: skip
    qfilter = list_filter(opts, opts.names)
    return generic_list(common.get_client(), C.QR_GROUP, fields, qfilter, opts, formatters)


def cmd_list_fields(opts: argparse.Namespace) -> int:
    return generic_list_fields(common.get_client(), C.QR_GROUP, opts.fields, opts)


def cmd_modify(opts: argparse.Namespace) -> int:
    (name,) = opts.group
    op = {"OP_ID": "OP_GROUP_SET_PARAMS", "group_name": name, "ndparams": opts.ndparams,
          "alloc_policy": opts.alloc_policy,
          "diskparams": ident_key_vals("-D", opts.diskparams), "ipolicy": _ipolicy(opts),
          **_states(opts)}  # fmt: skip
    result = common.submit_or_send(opts, op)
    if result:
        print(f"Modified node group {name}")
        for param, data in result:
            print(f" - {param:<5} -> {data}")
    return C.EXIT_SUCCESS


def cmd_remove(opts: argparse.Namespace) -> int:
    (name,) = opts.group
    common.submit_or_send(opts, {"OP_ID": "OP_GROUP_REMOVE", "group_name": name})
    return C.EXIT_SUCCESS


def cmd_rename(opts: argparse.Namespace) -> int:
    old, new = opts.group
    op = {"OP_ID": "OP_GROUP_RENAME", "group_name": old, "new_name": new}
    common.submit_or_send(opts, op)
    return C.EXIT_SUCCESS


def cmd_evacuate(opts: argparse.Namespace) -> int:
    (name,) = opts.group
    op = {"OP_ID": "OP_GROUP_EVACUATE", "group_name": name, "iallocator": opts.iallocator,
          "target_groups": opts.to, "early_release": opts.early_release,
          "sequential": opts.sequential, "force_failover": opts.force_failover}  # fmt: skip
    if _follow_jobs(opts, common.submit_or_send(opts, op)) == C.EXIT_SUCCESS:
        print("All instances evacuated successfully.")
        return C.EXIT_SUCCESS
    print("There were errors during the evacuation.")
    return C.EXIT_FAILURE


def group_info(row: list[Any]) -> list[tuple[str, Any]]:
    """One group as Ganeti's ``gnt-group info`` shows it."""
    name, ndparams, custom_nd, diskparams, custom_disk, ipolicy, custom_ipolicy = row
    fmt = cli_ipolicy.format_params_dict_info
    return [
        ("Node group", name),
        ("Node parameters", fmt(custom_nd, ndparams)),
        ("Disk parameters", fmt(custom_disk, diskparams)),
        ("Instance policy", cli_ipolicy.format_policy_info(custom_ipolicy, ipolicy, False)),
    ]


def cmd_info(opts: argparse.Namespace) -> int:
    rows = common.get_client().call("QueryGroups", opts.groups, INFO_FIELDS, False)
    text = format_generic_info([group_info(row) for row in rows])
    print(text)  # an empty line when nothing matched, as Ganeti's
    return C.EXIT_SUCCESS


def cmd_show_ispecs_cmd(opts: argparse.Namespace) -> int:
    field = "ipolicy" if opts.include_defaults else "custom_ipolicy"
    rows = common.get_client().call("QueryGroups", opts.groups, ["name", field], False)
    for name, policy in rows:
        print(f"gnt-group add{cli_ipolicy.ipolicy_command(policy, True)} {name}")
    return C.EXIT_SUCCESS


def _params_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--alloc-policy", choices=ALLOC_POLICIES)
    p.add_argument("--node-parameters", dest="ndparams", type=key_val("--node-parameters"))
    p.add_argument("-D", "--disk-parameters", dest="diskparams", action="append", default=[])
    p.add_argument("--hypervisor-state", dest="hv_state", action="append", default=[])
    p.add_argument("--disk-state", dest="disk_state", action="append", default=[])
    p.add_argument(cli_ipolicy.BOUNDS_SPECS_OPT, dest="ipolicy_bounds_specs")
    p.add_argument("--ipolicy-disk-templates", dest="ipolicy_disk_templates")
    p.add_argument("--ipolicy-vcpu-ratio", dest="ipolicy_vcpu_ratio")
    p.add_argument("--ipolicy-spindle-ratio", dest="ipolicy_spindle_ratio")
    common.add_submit_options(p)


def _add_changes(sub: Any) -> None:
    p = common.add_command(sub, "add", cmd_add, "Add a new node group to the cluster")
    common.add_args(p, "group", "GROUP", 1, 1)
    _params_options(p)
    p = common.add_command(sub, "modify", cmd_modify, "Alters the parameters of a node group")
    common.add_args(p, "group", "GROUP", 1, 1)
    _params_options(p)
    p = common.add_command(sub, "assign-nodes", cmd_assign_nodes, "Assign nodes to a group")
    common.add_args(p, "args", "GROUP NODE", 1, None)
    common.add_force(p)
    common.add_submit_options(p)
    p = common.add_command(sub, "remove", cmd_remove,
                           "Remove an (empty) node group from the cluster")  # fmt: skip
    common.add_args(p, "group", "GROUP", 1, 1)
    common.add_submit_options(p)
    p = common.add_command(sub, "rename", cmd_rename, "Rename a node group")
    common.add_args(p, "group", "GROUP", 2, 2)
    common.add_submit_options(p)
    p = common.add_command(sub, "evacuate", cmd_evacuate, "Evacuate all instances within a group")
    common.add_args(p, "group", "GROUP", 1, 1)
    p.add_argument("--to", action="append")
    p.add_argument("-I", "--iallocator")
    p.add_argument("--early-release", action="store_true")
    p.add_argument("--sequential", action="store_true")
    p.add_argument("--force-failover", action="store_true")
    common.add_submit_options(p, dry_run=False)


def _add_queries(sub: Any) -> None:
    p = common.add_command(sub, "list", cmd_list, "Lists the node groups in the cluster")
    common.add_list_options(p)
    add_filter_option(p)
    common.add_args(p, "names", "GROUP", 0, None)
    p = common.add_command(sub, "list-fields", cmd_list_fields,
                           "Lists all available fields for node groups")  # fmt: skip
    common.add_list_options(p, verbose=False)
    common.add_args(p, "fields", "FIELD", 0, None)
    p = common.add_command(sub, "info", cmd_info, "Show group information")
    common.add_args(p, "groups", "GROUP", 0, None)
    p = common.add_command(sub, "show-ispecs-cmd", cmd_show_ispecs_cmd,
                           "Show the command line to re-create a group")  # fmt: skip
    common.add_args(p, "groups", "GROUP", 0, None)
    p.add_argument("--include-defaults", action="store_true")
    tags.add_tag_commands(sub, C.TAG_NODEGROUP, "GROUP", "group")


def build_parser() -> common.Parser:
    parser, sub = common.make_parser("gnt-group", "Manage node groups")
    _add_changes(sub)
    _add_queries(sub)
    return parser


main, cli = common.entry_points(build_parser)


if __name__ == "__main__":
    cli()
