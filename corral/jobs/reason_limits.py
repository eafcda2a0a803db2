"""Ad-hoc rate limiting by reason, as luxid's scheduler does it (Ganeti's
design-optables, "Ad-Hoc Rate Limiting").

A reason ``rate-limit:<n>:<text>`` in the reason trail of any opcode of a job
puts the job in a bucket of ``n`` slots (a positive integer); at most ``n``
jobs of a bucket run at once.  A bucket is named by the reason's text after
``rate-limit:`` and by ``n``: ``rate-limit:2:x`` and ``rate-limit:3:x`` are two
buckets.  A job in several buckets starts only when each has a free slot;
other reasons are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from corral.jobs.model import Job

_PREFIX = "rate-limit"
# What Haskell's ``readMaybe :: Maybe Int`` reads: an integer, spaces around.
_NUMBER = re.compile(r"\s*-?[0-9]+\s*")


def bucket(reason: str) -> tuple[str, int] | None:
    """The bucket (name, slots) of a ``rate-limit:<n>:<text>`` reason, else None."""
    parts = reason.split(":")
    if len(parts) < 2 or parts[0] != _PREFIX or not _NUMBER.fullmatch(parts[1]):
        return None
    slots = int(parts[1])
    if slots <= 0:
        return None
    return f"{':'.join(parts[1:])}:{slots}", slots


def buckets(job: Job) -> dict[str, int]:
    """The buckets a job takes a slot in: name → slots."""
    found: dict[str, int] = {}
    for op in job.ops:
        for _source, reason, _timestamp in op.input.reason:
            parsed = bucket(str(reason))
            if parsed is not None:
                found[parsed[0]] = parsed[1]
    return found


class ReasonLimits:
    """One scheduling pass: the slots of the buckets the running jobs take."""

    def __init__(self, running: Iterable[Job]) -> None:
        self._used: dict[str, int] = {}
        for job in running:
            for name in buckets(job):
                self._used[name] = self._used.get(name, 0) + 1

    def admit(self, job: Job) -> bool:
        """Whether each bucket of the job has a free slot; if so it takes them."""
        wanted = buckets(job)
        if any(self._used.get(name, 0) >= slots for name, slots in wanted.items()):
            return False
        for name in wanted:
            self._used[name] = self._used.get(name, 0) + 1
        return True
