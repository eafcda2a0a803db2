"""Job filter rules (Ganeti's "design-optables"), kept in the configuration.

A rule is stored as luxid stores it: its predicates and action in the
normalised form they are shown in (see ``corral.jobs.filter_decode``).  The
rule has no name of its own; its uuid is its name too, so the store's
unique-name constraint holds.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from corral.objects.base import ConfigObject


class FilterRule(ConfigObject):
    """One rule: which jobs it matches, and what happens to them."""

    TABLE: ClassVar[str] = "filters"

    # The highest job id used when the rule was added or last replaced.
    watermark: int
    priority: int
    predicates: list[Any] = Field(default_factory=list)
    # "ACCEPT", "PAUSE", "REJECT", "CONTINUE" or ["RATE_LIMIT", n].
    action: str | list[Any]
    reason_trail: list[list[Any]] = Field(default_factory=list)
