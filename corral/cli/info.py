"""Helpers for the values Ganeti's ``info`` commands show (the layout itself is
``corral.cli.generic_info``): parameter dicts as text, names in Ganeti's order."""

from __future__ import annotations

import re
from collections.abc import Iterable

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any


def format_grouped_params(params: dict[str, Any]) -> dict[str, Any]:
    """Nested parameter dicts with every value as text (Ganeti's _FormatGroupedParams)."""
    return {
        key: format_grouped_params(value) if isinstance(value, dict) else str(value)
        for key, value in params.items()
    }


def nice_sort(values: Iterable[str]) -> list[str]:
    """Names sorted with their numbers compared as numbers (Ganeti's NiceSort):
    ``a1, a2, a10``."""
    return sorted(values, key=_nice_key)


def _nice_key(value: str) -> list[tuple[int, Any]]:
    # Groups of digits and of non-digits; as Ganeti, only the first eight count
    # separately, the rest of the name is compared as text.
    groups = re.findall(r"\d+|\D+", value)
    head, tail = groups[:8], "".join(groups[8:])
    key = [(0, int(g)) if g.isdigit() else (1, g) for g in head]
    return [*key, (1, tail)] if tail else key
