"""The cluster's uid pool (Ganeti's ``--uid-pool``): inclusive ranges of user
ids, stored as sorted ``[lower, higher]`` pairs, from which nodes take one uid
per instance running under ``security_model=pool``.

Parsing, formatting and the checks follow Ganeti 3.0.2's uidpool module (same
accepted inputs, same messages).  The command-line tools import this module,
so it uses only the standard library's fast modules (see corral/cli/__init__.py).
"""

from __future__ import annotations

from corral import constants as C
from corral import errors

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from collections.abc import Iterable

# Ganeti's UIDPOOL_UID_MIN and UIDPOOL_UID_MAX (the range of a 32-bit uid).
UID_MIN = 0
UID_MAX = 2**32 - 1


def parse(value: str, separator: str = ",") -> list[list[int]]:
    """``1000-2000,3000`` as sorted ``[lower, higher]`` pairs; empty items are
    skipped.  The ssconf file uses a newline as ``separator``."""
    ranges = []
    for item in value.split(separator):
        if not item:
            continue
        bounds = item.split("-")
        if len(bounds) > 2:
            raise errors.OpPrereqError(
                f"Invalid user-id range definition. Only one hyphen allowed: {bounds}",
                C.ECODE_INVAL,
            )
        pair = []
        for which, text in (("lower", bounds[0]), ("higher", bounds[-1])):
            try:
                pair.append(int(text))
            except ValueError as err:
                raise errors.OpPrereqError(
                    f"Invalid user-id value for {which} boundary of user-id range: {err}",
                    C.ECODE_INVAL,
                ) from None
        ranges.append(pair)
    return sorted(ranges)


def format_pool(pool: Iterable[Iterable[int]], separator: str = ", ") -> str:
    """The pool as text ``parse`` accepts back: ``1000-2000, 3000``."""
    out = []
    for lower, higher in pool:
        out.append(str(lower) if lower == higher else f"{lower}-{higher}")
    return separator.join(out)


def check(pool: Iterable[Iterable[int]]) -> None:
    """Refuse (OpPrereqError, ECODE_INVAL) a range whose bounds are reversed or
    outside the 32-bit uid space."""
    for lower, higher in pool:
        if lower > higher:
            raise errors.OpPrereqError(
                f"Lower user-id range boundary value ({lower})"
                f" is larger than higher boundary value ({higher})",
                C.ECODE_INVAL,
            )
        if lower < UID_MIN:
            raise errors.OpPrereqError(
                f"Lower user-id range boundary value ({lower})"
                f" is smaller than UIDPOOL_UID_MIN ({UID_MIN}).",
                C.ECODE_INVAL,
            )
        if higher > UID_MAX:
            raise errors.OpPrereqError(
                f"Higher user-id boundary value ({higher})"
                f" is larger than UIDPOOL_UID_MAX ({UID_MAX}).",
                C.ECODE_INVAL,
            )


def added(pool: list[list[int]], add: list[list[int]]) -> list[list[int]]:
    """The pool with the ranges of ``add`` it does not have yet, sorted.

    As Ganeti, a range is compared as a whole: ``1000-1010`` is added next to
    ``1000-2000`` although the latter covers it."""
    out = [list(r) for r in pool]
    for uid_range in add:
        if list(uid_range) not in out:
            out.append(list(uid_range))
    return sorted(out)


def removed(pool: list[list[int]], remove: list[list[int]]) -> list[list[int]]:
    """The pool without the ranges of ``remove``, each of which must be one of
    its ranges exactly (Ganeti does not split ranges)."""
    out = [list(r) for r in pool]
    for uid_range in remove:
        if list(uid_range) not in out:
            raise errors.OpPrereqError(
                "User-id range to be removed is not found in the current"
                f" user-id pool: {list(uid_range)}",
                C.ECODE_INVAL,
            )
        out.remove(list(uid_range))
    return out
