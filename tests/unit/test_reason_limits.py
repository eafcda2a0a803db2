"""Reasons that are ad-hoc rate limits, parsed as luxid's parseReasonRateLimit."""

from __future__ import annotations

import pytest

from corral.jobs.reason_limits import bucket


@pytest.mark.parametrize(
    ("reason", "parsed"),
    [
        ("rate-limit:2:hello", ("2:hello:2", 2)),
        ("rate-limit:3:hello", ("3:hello:3", 3)),  # another bucket than the one above
        ("rate-limit:2:a:b c", ("2:a:b c:2", 2)),
        ("rate-limit:2", ("2:2", 2)),
        ("rate-limit:0:x", None),
        ("rate-limit:-1:x", None),
        ("rate-limit:two:x", None),
        ("rate-limit", None),
        ("ratelimit:2:x", None),
        ("gnt:client:2", None),
    ],
)
def test_bucket(reason: str, parsed: tuple[str, int] | None) -> None:
    assert bucket(reason) == parsed
