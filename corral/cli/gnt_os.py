"""gnt-os: list, diagnose, info, modify (as Ganeti 3.0.2's: OP_OS_DIAGNOSE jobs)."""

from __future__ import annotations

import argparse
import sys

from corral import constants as C
from corral.cli import common
from corral.cli.generic_info import format_generic_info
from corral.cli.instance_specs import ident_key_val, key_val
from corral.cli.optvalues import boolean
from corral.cli.table import generate_table
from corral.nicesort import nice_sort

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any


def _diagnose(opts: argparse.Namespace, fields: list[str]) -> Any:
    """The rows of an OP_OS_DIAGNOSE job for ``fields`` (waited for)."""
    op = {"OP_ID": "OP_OS_DIAGNOSE", "output_fields": fields, "names": []}
    return common.submit_or_send(argparse.Namespace(**{**vars(opts), "submit": False}), op)


def os_names(name: str, variants: list[str]) -> list[str]:
    """``os+variant`` for each variant, or the plain name (CalculateOSNames)."""
    return [f"{name}+{v}" for v in variants] if variants else [name]


def cmd_list(opts: argparse.Namespace) -> int:
    result = _diagnose(opts, ["name", "variants"])
    names = [[n] for name, variants in result for n in os_names(name, variants)]
    for line in generate_table(None if opts.no_headers else ["Name"], names):
        print(line)
    return C.EXIT_SUCCESS


def cmd_info(opts: argparse.Namespace) -> int:
    fields = ["name", "valid", "variants", "parameters", "api_versions", "blacklisted",
              "hidden", "os_hvp", "osparams", "trusted"]  # fmt: skip
    result = _diagnose(opts, fields)
    if result is None:
        print("Can't get the OS list", file=sys.stderr)
        return C.EXIT_FAILURE
    wanted = list(opts.names)
    all_hvp: dict[str, Any] = {}
    all_osparams: dict[str, Any] = {}
    for name, valid, variants, parameters, api_versions, blk, hid, hvp, osp, trusted in result:
        all_hvp.update(hvp)
        all_osparams.update(osp)
        if opts.names:
            if name not in wanted:
                continue
            wanted.remove(name)
        print(f"{name}:")
        print(f"  - valid: {valid}")
        print(f"  - hidden: {hid}")
        print(f"  - blacklisted: {blk}")
        if valid:
            print("  - API versions:")
            print("".join(f"    - {v}\n" for v in sorted(api_versions)), end="")
            print("  - variants:")
            print("".join(f"    - {v}\n" for v in variants), end="")
            print("  - parameters:")
            print("".join(f"    - {p}: {doc}\n" for p, doc in parameters), end="")
        print(f"  - trusted: {trusted}")
        print()
    # Names that are not OSes of the nodes: their cluster settings, if any.
    for name in wanted:
        if name not in set(all_hvp) | set(all_osparams):
            print(f"{name}: ")
        else:
            settings = [
                ("OS-specific hypervisor parameters", all_hvp.get(name, {})),
                ("OS parameters", all_osparams.get(name, {})),
            ]
            print(format_generic_info([(name, settings)]))
        print()
    return C.EXIT_SUCCESS


def _status(status: bool, message: str) -> str:
    return "valid" if status else f"invalid - {message}"


def _node_text(entry: list[Any]) -> tuple[bool, str]:
    """One node's first entry for an OS, as diagnose shows it."""
    path, status, message, variants, params, api, trusted = entry
    text = f"{_status(status, message)} (path: {path})"
    max_api = max(api) if api else 0
    text += f" [API versions: {', '.join(map(str, api))}]" if api else " [no API versions declared]"
    if max_api >= 15:
        text += f" [variants: {', '.join(variants)}]" if variants else " [no variants]"
    if max_api >= 20:
        text += (
            f" [parameters: {', '.join(p[0] for p in params)}]" if params else " [no parameters]"
        )
    text += " [trusted]" if trusted else " [untrusted]"
    return bool(status), text


def cmd_diagnose(opts: argparse.Namespace) -> int:
    fields = ["name", "valid", "variants", "node_status", "hidden", "blacklisted"]
    result = _diagnose(opts, fields)
    if result is None:
        print("Can't get the OS list", file=sys.stderr)
        return C.EXIT_FAILURE
    bad = False
    for name, _valid, variants, node_data, hidden, blacklisted in result:
        good: dict[str, str] = {}
        failed: dict[str, str] = {}
        shadowed: dict[str, list[str]] = {}
        for node, entries in node_data.items():
            shadowed[node] = [
                f"    [hidden] path: {path}, status: {_status(status, message)}"
                for path, status, message, *_ in entries[1:]
            ]
            if not entries:
                failed[node] = "OS not found"
                continue
            ok, text = _node_text(entries[0])
            (good if ok else failed)[node] = text
        state = "valid" if good and not failed else ("invalid" if not good else "partial valid")
        bad = bad or state != "valid"
        line = f"OS: {name} [global status: {state}]"
        line += " [hidden]" if hidden else ""
        line += " [blacklisted]" if blacklisted else ""
        print(line)
        if variants:
            print(f"  Variants: [{', '.join(variants)}]")
        for nodes in (good, failed):
            for node in nice_sort(nodes):
                print(f"  Node: {node}, status: {nodes[node]}")
                for text in shadowed[node]:
                    print(text)
        print()
    return int(bad)


def cmd_modify(opts: argparse.Namespace) -> int:
    (os_name,) = opts.os
    hidden = None if opts.hidden is None else [["add" if opts.hidden else "remove", os_name]]
    blacklisted = (
        None if opts.blacklisted is None else [["add" if opts.blacklisted else "remove", os_name]]
    )
    os_hvp = {os_name: dict(opts.hvparams)} if opts.hvparams else None
    osparams = {os_name: opts.osparams} if opts.osparams else None
    private = {os_name: opts.osparams_private} if opts.osparams_private else None
    if not (os_hvp or osparams or private or hidden or blacklisted):
        print("At least one of OS parameters or hypervisor parameters must be passed",
              file=sys.stderr)  # fmt: skip
        return C.EXIT_FAILURE
    op = {
        "OP_ID": "OP_CLUSTER_SET_PARAMS",
        "os_hvp": os_hvp,
        "osparams": osparams,
        "osparams_private_cluster": private,
        "hidden_os": hidden,
        "blacklisted_os": blacklisted,
    }
    common.submit_or_send(opts, op)
    return C.EXIT_SUCCESS


def build_parser() -> common.Parser:
    parser, sub = common.make_parser("gnt-os", "Manage OS definitions")
    p = common.add_command(
        sub, "list", cmd_list, "Lists all valid operating systems on the cluster"
    )
    common.add_args(p, "args", "", 0, 0)
    p.add_argument("--no-headers", action="store_true")
    common.add_priority_option(p)
    p = common.add_command(sub, "diagnose", cmd_diagnose, "Diagnose all operating systems")
    common.add_args(p, "args", "", 0, 0)
    common.add_priority_option(p)
    p = common.add_command(
        sub, "info", cmd_info, "Show detailed information about operating systems",
        aliases=["show"],
    )  # fmt: skip
    common.add_args(p, "names", "OS", 0, None)
    common.add_priority_option(p)
    p = common.add_command(sub, "modify", cmd_modify, "Modify the OS parameters")
    common.add_args(p, "os", "OS", 1, 1)
    p.add_argument("-H", "--hypervisor-parameters", dest="hvparams", action="append",
                   type=ident_key_val("-H"), default=[])  # fmt: skip
    p.add_argument("-O", "--os-parameters", dest="osparams", type=key_val("-O"))
    p.add_argument("--os-parameters-private", dest="osparams_private",
                   type=key_val("--os-parameters-private"))  # fmt: skip
    p.add_argument("--hidden", type=boolean)
    p.add_argument("--blacklisted", type=boolean)
    common.add_submit_options(p)
    return parser


main, cli = common.entry_points(build_parser)


if __name__ == "__main__":
    cli()
