"""gnt-filter: add, list, list-fields, info, replace, delete (job filter rules).

Options and output are Ganeti's: ``add`` and ``replace`` print the rule's
uuid, ``list`` is a query table, ``info`` prints each rule's fields.
"""

from __future__ import annotations

import argparse
import json
import re
import time

from corral import constants as C
from corral.cli import common
from corral.cli.errors_fmt import UsageError
from corral.cli.table import generic_list, generic_list_fields
from corral.query.qlang import parse_filter

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

FIELDS = ["uuid", "watermark", "priority", "predicates", "action", "reason_trail"]
REASON_SOURCE_USER = "gnt:user"
# Ganeti's rule for list arguments: one with any of these characters is a
# query filter, one with a glob character matches uuids by pattern.
_FILTER_CHARS = frozenset("\t\n\v\f\r !\"'()/<=>\\~")
_GLOB_CHARS = frozenset("*?")
_RATE_LIMIT = re.compile(r"RATE_LIMIT\s+(\d+)")


def _arguments(opts: argparse.Namespace, command: str, count: int) -> list[str]:
    args: list[str] = opts.args
    if len(args) != count:
        if count == 0:
            raise UsageError(f"Command {command} expects no arguments")
        raise UsageError(f"Command {command} expects {count} argument(s)")
    return args


def _reason(opts: argparse.Namespace) -> list[list[Any]]:
    if not opts.reason:
        return []
    return [[REASON_SOURCE_USER, opts.reason, time.time_ns()]]


def _replace(opts: argparse.Namespace, uuid: str | None) -> int:
    client = common.get_client()
    result = client.call(
        "ReplaceFilter", uuid, opts.priority, opts.predicates, opts.action, _reason(opts)
    )
    print(result)
    return C.EXIT_SUCCESS


def cmd_add(opts: argparse.Namespace) -> int:
    """Add a rule (luxid chooses its uuid) and print the uuid."""
    _arguments(opts, "add", 0)
    return _replace(opts, None)


def cmd_replace(opts: argparse.Namespace) -> int:
    """Replace the rule with the given uuid (or create it) and print the uuid."""
    (uuid,) = _arguments(opts, "replace", 1)
    return _replace(opts, uuid)


def cmd_delete(opts: argparse.Namespace) -> int:
    """Remove the rule with the given uuid."""
    (uuid,) = _arguments(opts, "delete", 1)
    common.get_client().call("DeleteFilter", uuid)
    return C.EXIT_SUCCESS


def _glob_pattern(text: str) -> str:
    """Ganeti's DNS-name glob: ``*`` and ``?`` stop at dots; a domain may follow."""
    parts = re.sub(
        r"\*|\?|[^*?]+",
        lambda m: {"*": "[^.]*", "?": "[^.]"}.get(m.group(0), re.escape(m.group(0))),
        text,
    )
    return rf"^{parts}(\..*)?$"


def uuids_filter(args: list[str]) -> Any:
    """The query filter for the uuids (or the one filter) given to ``list``."""
    if len(args) == 1 and _FILTER_CHARS & set(args[0]):
        return parse_filter(args[0])
    if not args:
        return None
    return [
        "|",
        *(
            ["=~", "uuid", _glob_pattern(arg)] if _GLOB_CHARS & set(arg) else ["==", "uuid", arg]
            for arg in args
        ),
    ]


def cmd_list(opts: argparse.Namespace) -> int:
    """The rules (all, or those chosen by uuid, pattern or filter) as a table."""
    fields = common.output_fields(opts, FIELDS)
    client = common.get_client()
    return generic_list(client, C.QR_FILTER, fields, uuids_filter(opts.args), opts)


def cmd_list_fields(opts: argparse.Namespace) -> int:
    """The fields of the filter resource."""
    return generic_list_fields(common.get_client(), C.QR_FILTER, opts.args, opts)


def cmd_info(opts: argparse.Namespace) -> int:
    """Every field of the rules (all, or those with the given uuids)."""
    rows = common.get_client().call("QueryFilters", opts.args, FIELDS)
    for uuid, watermark, priority, predicates, action, reason_trail in rows:
        print(f"UUID: {uuid}")
        print(f"  Watermark: {watermark}")
        print(f"  Priority: {priority}")
        print(f"  Predicates: {predicates}")
        print(f"  Action: {action}")
        print(f"  Reason trail: {reason_trail}")
    return C.EXIT_SUCCESS


# Option values, read as Ganeti's option types read them
def integer(text: str) -> int:
    """optparse's integers: decimal, ``0x`` hexadecimal, ``0b`` binary, ``0`` octal."""
    try:
        prefix = text[:2].lower()
        if prefix == "0x":
            return int(text, 16)
        if prefix == "0b":
            return int(text[2:] or "0", 2)
        return int(text, 8 if text[:1] == "0" else 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer value: {text!r}") from None


def json_value(text: str) -> Any:
    """A JSON document (the predicates)."""
    try:
        return json.loads(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"invalid JSON value {text!r}: {err}") from None


def filter_action(text: str) -> Any:
    """An action as given; ``RATE_LIMIT n`` becomes ``["RATE_LIMIT", n]``."""
    match = _RATE_LIMIT.match(text)
    return ["RATE_LIMIT", int(match.group(1))] if match else text


def _rule_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--priority", type=integer, default=0, help="Priority of the rule (0 is evaluated first)"
    )
    parser.add_argument(
        "--predicates",
        type=json_value,
        default=[],
        help="The rule's predicates, a JSON list of [name, query filter]",
    )
    parser.add_argument(
        "--action",
        type=filter_action,
        default="CONTINUE",
        help="ACCEPT, PAUSE, REJECT, CONTINUE or 'RATE_LIMIT n' (n a positive integer)",
    )


def _command(sub: Any, name: str, handler: common.Handler, text: str) -> argparse.ArgumentParser:
    parser = common.add_command(sub, name, handler, text)
    parser.add_argument("--reason", help="The reason for executing the command")
    return parser


def build_parser() -> common.Parser:
    """gnt-filter's commands and options."""
    parser, sub = common.make_parser("gnt-filter", "Manage the job filter rules")
    p = _command(sub, "add", cmd_add, "Add a job filter rule; prints its uuid")
    _rule_options(p)
    p.add_argument("args", nargs="*", metavar="ARG")
    p = _command(sub, "list", cmd_list, f"List filter rules (default fields: {', '.join(FIELDS)})")
    common.add_list_options(p)
    p.add_argument("args", nargs="*", metavar="UUID")
    p = _command(sub, "list-fields", cmd_list_fields, "List the fields of filter rules")
    common.add_list_options(p, verbose=False)
    p.add_argument("args", nargs="*", metavar="FIELD")
    p = _command(sub, "info", cmd_info, "Show filter rules in detail (all without UUIDs)")
    p.add_argument("args", nargs="*", metavar="UUID")
    p = _command(sub, "replace", cmd_replace, "Replace (or create) the rule with this uuid")
    _rule_options(p)
    p.add_argument("args", nargs="*", metavar="UUID")
    p = _command(sub, "delete", cmd_delete, "Remove a filter rule")
    p.add_argument("args", nargs="*", metavar="UUID")
    return parser


main, cli = common.entry_points(build_parser)


if __name__ == "__main__":
    cli()
