"""Failed RAPI logins slow down the next attempts from the same address and
for the same user name.

The ``n``-th failure in a row of an address opens a *window* of
``base * 2**(n-1)`` seconds (at most ``cap``) during which its further
attempts wait; so does the ``n``-th failure for a user name, whatever the
address.  A user name's window holds only attempts from addresses that failed
recently themselves: an address without failures is always checked at once, so
guessing a user's password from many addresses never locks that user out of
their own.  A success shortens no window (else a guesser would alternate its
guesses with a login it knows), but credentials that already succeeded from an
address are no guess: they are checked at once.  Failures are forgotten
``forget_after`` seconds after the last one.

Memory stays bounded: at most ``max_entries`` addresses, user names and known
credentials each are remembered, the oldest forgotten first.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Failures:
    count: int
    last: float  # clock() at the latest failure
    until: float  # end of the window it opened


class _FailureTable:
    """Failures by key, ordered by the latest one (oldest first)."""

    def __init__(self, max_entries: int) -> None:
        self._max_entries = max_entries
        self._entries: OrderedDict[str, _Failures] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def until(self, key: str) -> float | None:
        """The end of ``key``'s window; None if it failed not recently."""
        entry = self._entries.get(key)
        return None if entry is None else entry.until

    def failed(self, key: str, now: float, delay: Callable[[int], float]) -> None:
        entry = self._entries.pop(key, None) or _Failures(count=0, last=now, until=now)
        entry.count += 1
        entry.last = now
        entry.until = now + delay(entry.count)
        self._entries[key] = entry
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)

    def expire(self, limit: float) -> None:
        """Forget the keys whose latest failure is at ``limit`` or older."""
        while self._entries:
            oldest = next(iter(self._entries.values()))
            if oldest.last > limit:
                break
            self._entries.popitem(last=False)


class LoginThrottle:
    """How long an authentication attempt waits, after failures of its address
    or of its user name."""

    def __init__(
        self,
        base: float = 0.05,
        cap: float = 5.0,
        forget_after: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = 10000,
    ) -> None:
        if base <= 0 or cap < base or forget_after <= 0 or max_entries < 1:
            raise ValueError(
                "LoginThrottle needs 0 < base <= cap, forget_after > 0, max_entries >= 1"
            )
        self._base = base
        self._cap = cap
        self._forget_after = forget_after
        self._clock = clock
        self._max_entries = max_entries
        self._addresses = _FailureTable(max_entries)
        self._users = _FailureTable(max_entries)
        # Digests of (address, credentials) that succeeded, by latest success.
        self._known: OrderedDict[bytes, float] = OrderedDict()

    def __len__(self) -> int:
        """How many entries are remembered (for tests and monitoring)."""
        return len(self._addresses) + len(self._users) + len(self._known)

    def wait(self, address: str, user: str, credentials: str) -> float:
        """Seconds before an attempt from ``address`` as ``user`` with
        ``credentials`` (the Authorization header) may be checked; 0: at once."""
        now = self._clock()
        self._expire(now)
        address_until = self._addresses.until(address)
        if address_until is None or _digest(address, credentials) in self._known:
            return 0.0
        until = max(address_until, self._users.until(user) or 0.0)
        return max(0.0, until - now)

    def failed(self, address: str, user: str, credentials: str) -> None:
        """Record a failed attempt."""
        now = self._clock()
        self._expire(now)
        self._addresses.failed(address, now, self._delay)
        self._users.failed(user, now, self._delay)
        self._known.pop(_digest(address, credentials), None)

    def succeeded(self, address: str, credentials: str) -> None:
        """Record a successful login: these credentials from this address are
        checked at once from now on (no window is shortened)."""
        now = self._clock()
        self._expire(now)
        key = _digest(address, credentials)
        self._known.pop(key, None)
        self._known[key] = now
        while len(self._known) > self._max_entries:
            self._known.popitem(last=False)

    def _delay(self, failures: int) -> float:
        # min() first: 2**count would overflow a float after ~1000 failures
        return float(min(self._cap, self._base * 2 ** min(failures - 1, 64)))

    def _expire(self, now: float) -> None:
        limit = now - self._forget_after
        self._addresses.expire(limit)
        self._users.expire(limit)
        while self._known and next(iter(self._known.values())) <= limit:
            self._known.popitem(last=False)


def _digest(address: str, credentials: str) -> bytes:
    """What identifies credentials from an address (never the password itself)."""
    return hashlib.sha256(f"{address}\0{credentials}".encode()).digest()
