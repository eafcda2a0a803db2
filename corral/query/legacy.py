"""Filters of Ganeti's old-style queries, which the new query language answers."""

from __future__ import annotations

from typing import Any

# Ganeti's legacy rule for OS diagnoses (LUOsDiagnose._BuildFilter): hidden,
# blacklisted and invalid OSes are left out unless the field that says so is
# asked for (field → the filter keeping the others).
_OS_HIDING = {
    "hidden": ["!", ["?", "hidden"]],
    "blacklisted": ["!", ["?", "blacklisted"]],
    "valid": ["?", "valid"],
}


def os_diagnose_filter(fields: list[str], names: list[str]) -> Any:
    """The filter of an OS diagnose of ``fields`` for ``names`` (all if empty)."""
    name_filter = ["|", *(["=", "name", n] for n in names)] if names else None
    status = [rule for field, rule in _OS_HIDING.items() if field not in fields]
    status_filter = ["&", *status] if status else None
    if name_filter and status_filter:
        return ["&", name_filter, status_filter]
    return name_filter or status_filter
