"""Tables as Ganeti prints them: list commands, list-fields, gnt-debug locks."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from corral import constants as C
from corral.luxi.client import Client

Formatter = Callable[[Any], str]

_RIGHT_ALIGNED = frozenset({C.QFT_NUMBER, C.QFT_NUMBER_FLOAT, C.QFT_UNIT})
_STATUS_TEXT = {  # (terse, verbose)
    C.RS_UNKNOWN: ("??", "(unknown)"),
    C.RS_NODATA: ("?", "(nodata)"),
    C.RS_UNAVAIL: ("-", "(unavail)"),
    C.RS_OFFLINE: ("*", "(offline)"),
}
_KIND_NAMES = {
    C.QFT_UNKNOWN: "Unknown",
    C.QFT_TEXT: "Text",
    C.QFT_BOOL: "Boolean",
    C.QFT_NUMBER: "Number",
    C.QFT_NUMBER_FLOAT: "Floating-point number",
    C.QFT_UNIT: "Storage size",
    C.QFT_TIMESTAMP: "Timestamp",
    C.QFT_OTHER: "Custom",
}


def format_time(value: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))


def _default_format(kind: str, value: Any) -> str:
    if kind == C.QFT_BOOL:
        return "Y" if value else "N"
    if kind == C.QFT_TIMESTAMP and isinstance(value, int | float):
        return format_time(value)
    return str(value)


def format_table(
    headers: Sequence[str] | None,
    rows: Sequence[Sequence[str]],
    right: Sequence[bool],
    separator: str | None,
) -> list[str]:
    """Lines of a table: padded columns joined by a space, or ``separator``."""
    all_rows = ([list(headers)] if headers is not None else []) + [list(r) for r in rows]
    if separator is not None:
        return [separator.join(r) for r in all_rows]
    ncols = len(right)
    widths = [max((len(r[i]) for r in all_rows), default=0) for i in range(ncols)]
    if ncols and not right[-1]:
        widths[-1] = 0  # no trailing padding after a left-aligned last column
    lines = []
    for row in all_rows:
        cells = [
            cell.rjust(widths[i]) if right[i] else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append(" ".join(cells))
    return lines


def print_query_result(
    result: dict[str, Any], opts: argparse.Namespace, formatters: dict[str, Formatter] | None = None
) -> int:
    """Print a Query result as a table; exit code 14 if a field is unknown."""
    fields = result["fields"]
    formatters = formatters or {}
    verbose = getattr(opts, "verbose", False)
    unknown = [f["name"] for f in fields if f["kind"] == C.QFT_UNKNOWN]
    rows = []
    for row in result["data"]:
        cells = []
        for fdef, (status, value) in zip(fields, row, strict=True):
            if status != C.RS_NORMAL:
                cells.append(_STATUS_TEXT.get(status, ("?", "?"))[1 if verbose else 0])
            elif fdef["name"] in formatters:
                cells.append(formatters[fdef["name"]](value))
            else:
                cells.append(_default_format(fdef["kind"], value))
        rows.append(cells)
    headers = None if opts.no_headers else [f["title"] for f in fields]
    right = [f["kind"] in _RIGHT_ALIGNED for f in fields]
    for line in format_table(headers, rows, right, opts.separator):
        print(line)
    if unknown:
        print(f"Warning: Queried for unknown fields {', '.join(unknown)}", file=sys.stderr)
        return C.EXIT_UNKNOWN_FIELD
    return C.EXIT_SUCCESS


def generic_list(
    client: Client,
    resource: str,
    fields: list[str],
    qfilter: Any,
    opts: argparse.Namespace,
    formatters: dict[str, Formatter] | None = None,
) -> int:
    return print_query_result(client.query(resource, fields, qfilter), opts, formatters)


def generic_list_fields(
    client: Client, resource: str, fields: list[str], opts: argparse.Namespace
) -> int:
    """``list-fields``: Name, Type, Title, Description of each field."""
    result = client.query_fields(resource, fields or None)
    rows = [
        [f["name"], _KIND_NAMES.get(f["kind"], f["kind"]), f["title"], f["doc"]]
        for f in result["fields"]
    ]
    headers = None if opts.no_headers else ["Name", "Type", "Title", "Description"]
    for line in format_table(headers, rows, [False] * 4, opts.separator):
        print(line)
    unknown = [f["name"] for f in result["fields"] if f["kind"] == C.QFT_UNKNOWN]
    if unknown:
        print(f"Warning: Queried for unknown fields {', '.join(unknown)}", file=sys.stderr)
        return C.EXIT_UNKNOWN_FIELD
    return C.EXIT_SUCCESS


def names_filter(field: str, names: Sequence[Any]) -> Any:
    """Ganeti's simple filter: the field equals one of the names."""
    if not names:
        return None
    return ["|", *(["==", field, n] for n in names)]
