"""Tables as Ganeti prints them: list commands, list-fields, gnt-debug locks."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence

from corral import constants as C
from corral import errors
from corral.luxi.client import Client
from corral.paramtypes import format_unit

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

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


def format_result_error(status: int, verbose: bool = True) -> str:
    """The text of a result status other than RS_NORMAL (Ganeti's FormatResultError)."""
    return _STATUS_TEXT[status][1 if verbose else 0]


def format_time(value: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))


def _default_format(kind: str, value: Any) -> str:
    if kind == C.QFT_BOOL:
        return "Y" if value else "N"
    if kind == C.QFT_TIMESTAMP and isinstance(value, int | float):
        return format_time(value)
    return str(value)


def _kind_formatter(kind: str, units: str) -> Formatter:
    """The default formatter of a field kind (plain ``str`` for most)."""
    if kind in (C.QFT_BOOL, C.QFT_TIMESTAMP):
        return lambda value: _default_format(kind, value)
    if kind == C.QFT_UNIT:
        return lambda value: format_unit(value, units)
    return str


def format_table(
    headers: Sequence[str] | None,
    rows: Sequence[Sequence[str]],
    right: Sequence[bool],
    separator: str | None,
) -> list[str]:
    """Lines of a table: padded columns joined by a space, or ``separator``."""
    columns = [[row[i] for row in rows] for i in range(len(right))]
    return format_columns(headers, columns, right, separator, len(rows))


def generate_table(headers: Sequence[str] | None, rows: Sequence[Sequence[str]]) -> list[str]:
    """Ganeti's GenerateTable for left-aligned text columns: the header line is
    padded to every column's width, the last column of the data lines is not."""
    lines = format_table(None, rows, [False] * len(headers or rows[0] if rows else ()), None)
    if headers is None:
        return lines
    widths = [max([len(h), *(len(row[i]) for row in rows)]) for i, h in enumerate(headers)]
    return [" ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)), *lines]


def format_columns(
    headers: Sequence[str] | None,
    columns: Sequence[Sequence[str]],
    right: Sequence[bool],
    separator: str | None,
    nrows: int,
) -> list[str]:
    """Lines of a table given column by column (as ``format_table``).

    Works a column at a time, which keeps listing thousands of rows cheap.
    """
    if headers is not None:
        columns = [[title, *column] for title, column in zip(headers, columns, strict=True)]
        nrows += 1
    if not columns:
        return [""] * nrows
    if separator is not None:
        return [separator.join(cells) for cells in zip(*columns, strict=True)]
    padded = []
    last = len(columns) - 1
    for index, column in enumerate(columns):
        if index == last and not right[index]:
            padded.append(column)  # no trailing padding after a left-aligned last column
            continue
        width = max(map(len, column), default=0)
        if right[index]:
            padded.append([cell.rjust(width) for cell in column])
        else:
            padded.append([cell.ljust(width) for cell in column])
    return [" ".join(cells) for cells in zip(*padded, strict=True)]


def print_query_result(
    result: dict[str, Any], opts: argparse.Namespace, formatters: dict[str, Formatter] | None = None
) -> int:
    """Print a Query result as a table; exit code 14 if a field is unknown."""
    fields = result["fields"]
    data = result["data"]
    formatters = formatters or {}
    verbose = 1 if getattr(opts, "verbose", False) else 0
    unknown = [f["name"] for f in fields if f["kind"] == C.QFT_UNKNOWN]
    if any(len(row) != len(fields) for row in data):
        raise errors.ProgrammerError("Query result rows do not match its fields")
    normal = C.RS_NORMAL
    units = getattr(opts, "units", None) or ("m" if opts.separator is not None else "h")
    columns = []
    for index, fdef in enumerate(fields):
        fmt = formatters.get(fdef["name"]) or _kind_formatter(fdef["kind"], units)
        columns.append(
            [
                fmt(value) if status == normal else _STATUS_TEXT.get(status, ("?", "?"))[verbose]
                for status, value in [row[index] for row in data]
            ]
        )
    headers = None if opts.no_headers else [f["title"] for f in fields]
    right = [f["kind"] in _RIGHT_ALIGNED for f in fields]
    lines = format_columns(headers, columns, right, opts.separator, len(data))
    if lines:
        sys.stdout.write("\n".join(lines) + "\n")
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


def list_filter(
    opts: argparse.Namespace,
    names: list[str],
    qfilter: Any = None,
    namefield: str = "name",
    isnumeric: bool = False,
) -> Any:
    """A list command's filter, as Ganeti's GenericList makes it: its arguments
    (names, globs or one filter; ``-F`` forces a filter), and ``qfilter``."""
    from corral.query.qlang import make_filter

    namefilter = make_filter(names, bool(opts.force_filter), namefield, isnumeric)
    if qfilter is None:
        return namefilter
    return qfilter if namefilter is None else ["&", namefilter, qfilter]


def add_filter_option(parser: argparse.ArgumentParser) -> None:
    """Ganeti's ``-F/--filter``: the arguments are one filter, not names."""
    parser.add_argument(
        "-F",
        "--filter",
        dest="force_filter",
        action="store_true",
        help="Whether to force treatment of the arguments as a filter",
    )


def names_filter(field: str, names: Sequence[Any]) -> Any:
    """Ganeti's simple filter: the field equals one of the names."""
    if not names:
        return None
    return ["|", *(["==", field, n] for n in names)]
