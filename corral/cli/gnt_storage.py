"""gnt-storage: diagnose, info (as Ganeti 3.0.2's: OP_EXT_STORAGE_DIAGNOSE jobs)."""

from __future__ import annotations

import argparse
import sys

from corral import constants as C
from corral.cli import common
from corral.nicesort import nice_sort

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any


def _diagnose(opts: argparse.Namespace, fields: list[str]) -> Any:
    """The rows of an OP_EXT_STORAGE_DIAGNOSE job for ``fields`` (waited for)."""
    op = {"OP_ID": "OP_EXT_STORAGE_DIAGNOSE", "output_fields": fields, "names": []}
    return common.submit_or_send(argparse.Namespace(**{**vars(opts), "submit": False}), op)


def cmd_info(opts: argparse.Namespace) -> int:
    result = _diagnose(opts, ["name", "nodegroup_status", "parameters"])
    if not result:
        print("Can't get the ExtStorage providers list", file=sys.stderr)
        return C.EXIT_FAILURE
    wanted = list(opts.names)
    for name, nodegroup_data, parameters in result:
        if opts.names:
            if name not in wanted:
                continue
            wanted.remove(name)
        print(f"{name}:")
        valid = [group for group, status in nodegroup_data.items() if status]
        if valid:
            print("  - Valid for nodegroups:")
            for group in nice_sort(valid):
                print(f"      {group}")
            print("  - Supported parameters:")
            for pname, pdesc in parameters:
                print(f"      {pname}: {pdesc}")
        else:
            print("  - Invalid for all nodegroups")
        print()
    for name in wanted:
        print(f"{name}: Not Found")
        print()
    return C.EXIT_SUCCESS


def _node_text(entries: list[Any]) -> tuple[bool, str]:
    """Whether the provider is valid on a node, and what diagnose says of it."""
    if not entries:
        return False, "ExtStorage provider not found"
    path, status, message, params = entries[0]
    text = "valid" if status else f"invalid - {message}"
    text += f" (path: {path})"
    text += f" [parameters: {', '.join(p[0] for p in params)}]" if params else " [no parameters]"
    return bool(status), text


def cmd_diagnose(opts: argparse.Namespace) -> int:
    result = _diagnose(opts, ["name", "node_status", "nodegroup_status"])
    if not result:
        print("Can't get the list of ExtStorage providers", file=sys.stderr)
        return C.EXIT_FAILURE
    for name, node_data, nodegroup_data in result:
        nodes: tuple[dict[str, str], dict[str, str]] = ({}, {})  # valid, bad
        for node, entries in node_data.items():
            ok, text = _node_text(entries)
            nodes[0 if ok else 1][node] = text
        print(f"Provider: {name}")
        print("---")
        for texts in nodes:
            for node in nice_sort(texts):
                print(f"  Node: {node}, status: {texts[node]}")
        print("  --")
        for valid in (True, False):
            groups = [group for group, status in nodegroup_data.items() if bool(status) is valid]
            for group in nice_sort(groups):
                print(f"  For nodegroup: {group} --> {'valid' if valid else 'invalid'}")
        print()
    return C.EXIT_SUCCESS


def build_parser() -> common.Parser:
    parser, sub = common.make_parser("gnt-storage", "Manage ExtStorage providers")
    p = common.add_command(sub, "diagnose", cmd_diagnose, "Diagnose all ExtStorage providers")
    common.add_args(p, "args", "", 0, 0)
    common.add_priority_option(p)
    p = common.add_command(sub, "info", cmd_info, "Show info about ExtStorage providers")
    common.add_args(p, "names", "PROVIDER", 0, None)
    common.add_priority_option(p)
    return parser


main, cli = common.entry_points(build_parser)


if __name__ == "__main__":
    cli()
