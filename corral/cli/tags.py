"""The ``list-tags``, ``add-tags`` and ``remove-tags`` commands of every kind of
object, as Ganeti's: tags from the arguments and ``--from FILE`` (``-``: stdin)."""

from __future__ import annotations

import argparse
import sys

from corral import constants as C
from corral import errors
from corral.cli import common

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any


def _object(opts: argparse.Namespace) -> tuple[str, str | None, list[str]]:
    """``(kind, name, tags)`` from the arguments (the cluster has no name)."""
    args = list(opts.args)
    if opts.tag_kind == C.TAG_CLUSTER:
        return opts.tag_kind, "", args
    if not args:
        raise errors.OpPrereqError("no arguments passed to the command", C.ECODE_INVAL)
    return opts.tag_kind, args[0], args[1:]


def _with_file(opts: argparse.Namespace, tags: list[str]) -> list[str]:
    if opts.tags_source is None:
        return tags
    if opts.tags_source == "-":
        lines = sys.stdin.readlines()
    else:
        with open(opts.tags_source) as handle:
            lines = handle.readlines()
    return tags + [line.strip() for line in lines]


def cmd_list_tags(opts: argparse.Namespace) -> int:
    kind, name, _ = _object(opts)
    for tag in sorted(common.get_client().call("QueryTags", kind, name)):
        print(tag)
    return C.EXIT_SUCCESS


def _change(opts: argparse.Namespace, op_id: str, nothing: str) -> int:
    kind, name, tags = _object(opts)
    tags = _with_file(opts, tags)
    if not tags:
        raise errors.OpPrereqError(nothing, C.ECODE_INVAL)
    common.submit_or_send(opts, {"OP_ID": op_id, "kind": kind, "name": name, "tags": tags})
    return C.EXIT_SUCCESS


def cmd_add_tags(opts: argparse.Namespace) -> int:
    return _change(opts, "OP_TAGS_SET", "No tags to be added")


def cmd_remove_tags(opts: argparse.Namespace) -> int:
    return _change(opts, "OP_TAGS_DEL", "No tags to be removed")


def add_tag_commands(sub: Any, kind: str, metavar: str, what: str) -> None:
    """The three tag commands for objects of ``kind`` (named by ``metavar``)."""
    named = kind != C.TAG_CLUSTER
    p = common.add_command(sub, "list-tags", cmd_list_tags, f"List the tags of the given {what}")
    common.add_args(p, "args", metavar, int(named), int(named))
    p.set_defaults(tag_kind=kind)
    for name, handler, text in (
        ("add-tags", cmd_add_tags, f"Add tags to the given {what}"),
        ("remove-tags", cmd_remove_tags, f"Remove tags from the given {what}"),
    ):
        p = common.add_command(sub, name, handler, text)
        common.add_args(p, "args", f"{metavar} TAG" if named else "TAG", int(named), None)
        p.add_argument("--from", dest="tags_source", help="File with tag names")
        p.set_defaults(tag_kind=kind)
        common.add_submit_options(p, dry_run=False)
