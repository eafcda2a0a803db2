"""Names in Ganeti's "nice" order (its NiceSort): runs of digits compare as
numbers, so ``a1, a2, a10``.  Stdlib only: the gnt-* commands use it too."""

from __future__ import annotations

import re

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

_GROUPS = re.compile(r"\d+|\D+")


def nice_key(value: str) -> list[tuple[int, Any]]:
    """The sort key: as Ganeti's, only the first eight groups of digits or
    non-digits count separately, the rest of the name is compared as text."""
    groups = _GROUPS.findall(value)
    head, tail = groups[:8], "".join(groups[8:])
    key = [(0, int(g)) if g.isdigit() else (1, g) for g in head]
    return [*key, (1, tail)] if tail else key


def nice_sort(values: Iterable[str]) -> list[str]:
    """``values`` in Ganeti's nice order."""
    return sorted(values, key=nice_key)
