"""Ganeti's "generic info" layout, a YAML-like tree (``gnt-job info`` and others).

The data is built of:

- dicts: keys sorted, ``key: value`` lines;
- ordered dicts, written as lists of ``(key, value)`` or ``(key, value,
  group)`` tuples: keys in order; the values of entries sharing a ``group``
  are aligned;
- tuples of scalars: written inline, ``[a, b, c]``;
- lists (and other tuples): one ``- item`` line per item;
- anything else: its ``str()``.

A nested value starts on the next line, indented by two spaces per level; an
empty dict or list leaves the value empty.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any


_INDENT = "  "


def format_generic_info(data: Any) -> str:
    """The whole tree as Ganeti prints it (no trailing newline)."""
    out: list[str] = []
    _write(out, data, 0, after_key=False)
    return "".join(out).rstrip("\n")


def _scalar(value: Any) -> bool:
    return not isinstance(value, list | dict | tuple)


def _write(out: list[str], data: Any, level: int, after_key: bool) -> None:
    if isinstance(data, dict):
        _write_pairs(out, [(key, data[key]) for key in sorted(data)], level, after_key)
    elif isinstance(data, list) and data and isinstance(data[0], tuple):
        _write_pairs(out, data, level, after_key)
    elif isinstance(data, tuple) and all(map(_scalar, data)):
        out.append("[" + ", ".join(map(str, data)) + "]\n")
    elif isinstance(data, list | tuple):
        _write_items(out, data, level, after_key)
    else:
        out.append(f"{data}\n")


def _write_pairs(out: list[str], entries: list[Any], level: int, after_key: bool) -> None:
    if not entries:
        out.append("\n")
        return
    widths: dict[Any, int] = {}
    for entry in entries:
        if len(entry) > 2:
            widths[entry[2]] = max(widths.get(entry[2], 0), len(entry[0]))
    if after_key:
        out.append("\n")
    for index, entry in enumerate(entries):
        key, value = entry[0], entry[1]
        if after_key or index:
            out.append(_INDENT * level)
        out.append(f"{key}: ")
        if len(entry) > 2:
            out.append(" " * (widths[entry[2]] - len(key)))
        _write(out, value, level + 1, after_key=True)


def _write_items(
    out: list[str], items: list[Any] | tuple[Any, ...], level: int, after_key: bool
) -> None:
    if not items:
        out.append("\n")
        return
    if after_key:
        out.append("\n")
    for index, item in enumerate(items):
        if after_key or index:
            out.append(_INDENT * level)
        out.append("- ")
        _write(out, item, level + 1, after_key=False)
