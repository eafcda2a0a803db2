"""Ganeti's YAML-like "generic info" layout (gnt-job info, gnt-cluster info)."""

from __future__ import annotations

from typing import Any


def format_scalar(value: Any) -> str:
    return str(value)


def _is_scalar(value: Any) -> bool:
    return not isinstance(value, dict | list | tuple)


def generic_info_lines(data: Any, indent: int = 0) -> list[str]:
    """Lines for a list of ``(key, value)`` pairs or a dict, nested by 2 spaces.

    A key whose value is nested is written as ``key: `` (with the trailing
    space) followed by the nested block; dict keys are sorted; a list of
    scalars is written inline as ``[a, b]``.
    """
    pad = "  " * indent
    lines: list[str] = []
    items = sorted(data.items()) if isinstance(data, dict) else list(data)
    for key, value in items:
        if (isinstance(value, dict) and value) or (
            isinstance(value, list) and value and _is_pairs(value)
        ):
            lines.append(f"{pad}{key}: ")
            lines.extend(generic_info_lines(value, indent + 1))
        elif isinstance(value, list) and value and not all(_is_scalar(v) for v in value):
            lines.append(f"{pad}{key}: ")
            for item in value:
                lines.extend(_list_item(item, indent + 1))
        elif isinstance(value, list | tuple):
            lines.append(
                f"{pad}{key}: " + ("[" + ", ".join(map(str, value)) + "]" if value else "")
            )
        elif isinstance(value, dict):
            lines.append(f"{pad}{key}: ")
        else:
            lines.append(f"{pad}{key}: {format_scalar(value)}")
    return lines


def _is_pairs(value: list[Any]) -> bool:
    return all(isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str) for v in value)


def _list_item(item: Any, indent: int) -> list[str]:
    pad = "  " * indent
    if _is_scalar(item):
        return [f"{pad}- {format_scalar(item)}"]
    sub = generic_info_lines(item, indent + 1)
    if not sub:
        return [f"{pad}- "]
    first = sub[0].lstrip()
    return [f"{pad}- {first}", *sub[1:]]
