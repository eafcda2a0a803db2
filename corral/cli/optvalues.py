"""Ganeti's syntax of option values: escaped comma lists, ``key=value`` lists
and booleans (the parsing errors are Ganeti's)."""

from __future__ import annotations

import re

from corral import constants as C
from corral import errors

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any


def unescape_and_split(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` unless escaped by an odd number of backslashes, then
    drop one level of backslashes (Ganeti's UnescapeAndSplit)."""
    parts = text.split(sep)
    out: list[str] = []
    while parts:
        first = parts.pop(0)
        backslashes = len(first) - len(first.rstrip("\\"))
        if backslashes % 2 == 1 and parts:
            parts.insert(0, first + sep + parts.pop(0))
            continue
        out.append(first)
    return [re.sub(r"\\(.)", r"\1", part) for part in out]


def split_key_val(opt: str, data: str, parse_prefixes: bool = True) -> dict[str, Any]:
    """``k=v,k2=v2`` as a dict; bare ``no_k`` is False, ``-k`` None, ``k`` True."""
    out: dict[str, Any] = {}
    for elem in unescape_and_split(data) if data else []:
        key: str
        value: Any
        if "=" in elem:
            key, value = elem.split("=", 1)
        elif not parse_prefixes:
            raise errors.ParameterError(f"Missing value for key '{elem}' in option {opt}")
        elif elem.startswith("no_"):
            key, value = elem[3:], False
        elif elem.startswith("-"):
            key, value = elem[1:], None
        else:
            key, value = elem, True
        if key in out:
            raise errors.ParameterError(f"Duplicate key '{key}' in option {opt}")
        out[key] = value
    return out


def boolean(value: str) -> bool:
    """``yes``/``true`` or ``no``/``false`` (Ganeti's "bool" option type)."""
    lowered = value.lower()
    if lowered in ("false", "no"):
        return False
    if lowered in ("true", "yes"):
        return True
    raise errors.ParameterError(f"Invalid boolean value '{lowered}'")


def parse_timespec(value: str) -> int:
    """Seconds from ``30``, ``30s``, ``5m``, ``4h``, ``2d`` or ``1w`` (Ganeti's ParseTimespec)."""
    if not value:
        raise errors.OpPrereqError("Empty time specification passed", C.ECODE_INVAL)
    multipliers = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    multiplier = multipliers.get(value[-1], 1)
    if value[-1] in multipliers:
        value = value[:-1]
        if not value:
            raise errors.OpPrereqError(
                "Invalid time specification (only suffix passed)", C.ECODE_INVAL
            )
    try:
        return int(value) * multiplier
    except ValueError:
        raise errors.OpPrereqError(f"Invalid time specification '{value}'", C.ECODE_INVAL) from None
