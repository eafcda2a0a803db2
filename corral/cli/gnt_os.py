"""gnt-os: list, diagnose, info, modify."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from corral import constants as C
from corral import errors
from corral.cli import common
from corral.cli.table import format_table

_OS_FIELDS = [
    "name",
    "valid",
    "hidden",
    "blacklisted",
    "variants",
    "api_versions",
    "parameters",
    "node_status",
    "osparams",
    "os_version",
    "os_version_consistent",
    "trusted",
]


def _oses(client: Any, names: list[str] | None = None) -> list[dict[str, Any]]:
    """Every OS as a dict of the fields above (via Query("os"))."""
    qfilter = ["|", *(["=", "name", n] for n in names)] if names else None
    result = client.query(C.QR_OS, _OS_FIELDS, qfilter)
    return [{f: cell[1] for f, cell in zip(_OS_FIELDS, row, strict=True)} for row in result["data"]]


def _full_names(os: dict[str, Any]) -> list[str]:
    if os["variants"]:
        return [f"{os['name']}+{v}" for v in os["variants"]]
    return [os["name"]]


def cmd_list(opts: argparse.Namespace) -> int:
    names = []
    for os in _oses(common.get_client()):
        if not os["valid"]:
            continue
        if (os["hidden"] and not opts.hidden) or (os["blacklisted"] and not opts.blacklisted):
            continue
        names += _full_names(os)
    headers = None if opts.no_headers else ["Name"]
    for line in format_table(headers, [[n] for n in sorted(names)], [False], None):
        print(line)
    return C.EXIT_SUCCESS


def _node_status(status: list[Any], version: str | None) -> tuple[bool, str]:
    """``(valid, text)`` of one node's entry, as Ganeti's diagnose prints it
    (plus Corral's ``[os_version: ...]``)."""
    path, valid, error, variants, params, api, _trusted = status
    text = ("valid" if valid else f"invalid - {error}") + f" (path: {path})"
    if api:
        text += f" [API versions: {', '.join(map(str, api))}]"
    else:
        text += " [no API versions declared]"
    max_api = max(api) if api else 0
    if max_api >= 15:
        text += f" [variants: {', '.join(variants)}]" if variants else " [no variants]"
    if max_api >= 20:
        names = ", ".join(p[0] for p in params)
        text += f" [parameters: {names}]" if names else " [no parameters]"
    if version:
        text += f" [os_version: {version}]"
    return bool(valid), text


def cmd_diagnose(opts: argparse.Namespace) -> int:
    bad = False
    for os in _oses(common.get_client()):
        nodes_valid: dict[str, str] = {}
        nodes_bad: dict[str, str] = {}
        for node, status in os["node_status"].items():
            if not status:
                nodes_bad[node] = "OS not found"
                continue
            valid, text = _node_status(status[0], os["os_version"].get(node))
            for path, shadow_valid, error, *_ in status[1:]:
                shadow = "valid" if shadow_valid else f"invalid - {error}"
                text += f"\n    [hidden] path: {path}, status: {shadow}"
            (nodes_valid if valid else nodes_bad)[node] = text
        if nodes_valid and not nodes_bad:
            state = "valid"
        else:
            state = "partial valid" if nodes_valid else "invalid"
            bad = True
        line = f"OS: {os['name']} [global status: {state}]"
        line += "".join(f" [{m}]" for m in ("hidden", "blacklisted") if os[m])
        if not os["os_version_consistent"]:
            line += " [os_version differs between nodes]"
            bad = True
        print(line)
        if os["variants"]:
            print(f"  Variants: [{', '.join(os['variants'])}]")
        for nodes in (nodes_valid, nodes_bad):
            for node in sorted(nodes):
                print(f"  Node: {node}, status: {nodes[node]}")
        print()
    return C.EXIT_FAILURE if bad else C.EXIT_SUCCESS


def cmd_info(opts: argparse.Namespace) -> int:
    client = common.get_client()
    cluster = client.call("QueryClusterInfo")
    oses = {os["name"]: os for os in _oses(client, opts.names or None)}
    if not oses and not opts.names:
        print("Can't get the OS list", file=sys.stderr)
        return C.EXIT_FAILURE
    for name in opts.names or sorted(oses):
        os = oses.get(name)
        if os is None:  # as Ganeti: an unknown name gets an empty entry
            print(f"{name}: \n")
            continue
        print(f"{os['name']}:")
        print(f"  - valid: {os['valid']}")
        print(f"  - hidden: {os['hidden']}")
        print(f"  - blacklisted: {os['blacklisted']}")
        if os["valid"]:
            versions = sorted(set(os["os_version"].values()))
            print(f"  - OS version: {', '.join(v for v in versions if v) or '(none)'}")
            print("  - API versions:")
            for api in sorted(os["api_versions"]):
                print(f"    - {api}")
            print("  - variants:")
            for variant in os["variants"]:
                print(f"    - {variant}")
            print("  - parameters:")
            for name, doc in os["parameters"]:
                print(f"    - {name}: {doc}")
        params = cluster["osparams"].get(os["name"], {})
        if params:
            print("  - default parameters:")
            for key in sorted(params):
                print(f"    - {key}: {params[key]}")
        print()
    return C.EXIT_SUCCESS


def _yes_no(value: str | None, what: str) -> bool | None:
    if value is None:
        return None
    if value not in ("yes", "no"):
        raise errors.OpPrereqError(f"--{what} takes yes or no, not '{value}'", C.ECODE_INVAL)
    return value == "yes"


def cmd_modify(opts: argparse.Namespace) -> int:
    op: dict[str, Any] = {"OP_ID": "OP_CLUSTER_SET_PARAMS"}
    if opts.os_parameters:
        op["osparams"] = {opts.os: common.parse_kv(opts.os_parameters)}
    if opts.os_parameters_private:
        op["osparams_private_cluster"] = {opts.os: common.parse_kv(opts.os_parameters_private)}
    for flag, key in (("hidden", "hidden_os"), ("blacklisted", "blacklisted_os")):
        value = _yes_no(getattr(opts, flag), flag)
        if value is not None:
            if "+" in opts.os:
                raise errors.OpPrereqError(
                    f"--{flag} applies to an OS, not a variant ('{opts.os}')", C.ECODE_INVAL
                )
            op[key] = [["add" if value else "remove", opts.os]]
    if len(op) == 1:
        raise errors.OpPrereqError("No changes to the OS given", C.ECODE_INVAL)
    common.submit_or_send(opts, op)
    return C.EXIT_SUCCESS


def build_parser() -> common.Parser:
    parser, sub = common.make_parser("gnt-os", "Manage OS definitions")
    p = common.add_command(sub, "list", cmd_list, "Lists the valid OSes")
    p.add_argument("--no-headers", action="store_true")
    p.add_argument("--hidden", action="store_true", help="Include hidden OSes")
    p.add_argument("--blacklisted", action="store_true", help="Include blacklisted OSes")
    common.add_command(sub, "diagnose", cmd_diagnose, "Diagnoses the OS definitions on all nodes")
    p = common.add_command(sub, "info", cmd_info, "Shows OS details", aliases=["show"])
    p.add_argument("names", nargs="*", metavar="OS")
    p = common.add_command(sub, "modify", cmd_modify, "Changes an OS's cluster settings")
    p.add_argument("os", metavar="OS")
    p.add_argument("-O", "--os-parameters")
    p.add_argument("--os-parameters-private")
    p.add_argument("--hidden", metavar="yes|no")
    p.add_argument("--blacklisted", metavar="yes|no")
    common.add_submit_options(p)
    return parser


main, cli = common.entry_points(build_parser)


if __name__ == "__main__":
    cli()
