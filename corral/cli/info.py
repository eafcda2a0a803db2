"""Helpers for the values Ganeti's ``info`` commands show (the layout itself is
``corral.cli.generic_info``): parameter dicts as text, names in Ganeti's order."""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any


def format_grouped_params(params: dict[str, Any]) -> dict[str, Any]:
    """Nested parameter dicts with every value as text (Ganeti's _FormatGroupedParams)."""
    return {
        key: format_grouped_params(value) if isinstance(value, dict) else str(value)
        for key, value in params.items()
    }
