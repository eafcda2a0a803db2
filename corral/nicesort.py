"""Names in Ganeti's "nice" order (its NiceSort): runs of digits compare as
numbers, so ``a1, a2, a10``.  Stdlib only: the gnt-* commands use it too."""

from __future__ import annotations

import functools
import re

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

_GROUPS = re.compile(r"\d+|\D+")
_ASCII_GROUPS = re.compile(r"[0-9]+|[^0-9]+")  # Haskell's isDigit: ASCII digits only


def nice_key(value: str) -> list[tuple[int, Any]]:
    """The sort key of Ganeti's Python NiceSort: only the first eight groups of
    digits or non-digits count separately, the rest of the name is compared as text."""
    groups = _GROUPS.findall(value)
    head, tail = groups[:8], "".join(groups[8:])
    key = [(0, int(g)) if g.isdigit() else (1, g) for g in head]
    return [*key, (1, tail)] if tail else key


@functools.lru_cache(maxsize=1 << 16)  # queries sort the same names again and again
def luxid_key(value: str) -> tuple[tuple[int, Any], ...]:
    """The sort key of Ganeti's Haskell niceSort (luxid's query answers): every
    group of digits or non-digits counts."""
    groups = _ASCII_GROUPS.findall(value)
    return tuple((0, int(g)) if "0" <= g[0] <= "9" else (1, g) for g in groups)


def nice_sort(values: Iterable[str]) -> list[str]:
    """``values`` in Ganeti's nice order."""
    return sorted(values, key=nice_key)
