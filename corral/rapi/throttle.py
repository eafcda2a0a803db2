"""Failed RAPI logins slow the next attempts of the same client down.

After ``n`` failures in a row a client waits ``base * 2**(n-1)`` seconds
(at most ``cap``) before each further authentication attempt is answered;
a success, or ``forget_after`` seconds without a failure, clears it.  Memory
stays bounded: at most ``max_clients`` clients are remembered, the ones that
failed longest ago are forgotten first.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Failures:
    count: int
    last: float  # clock() at the latest failure


class LoginThrottle:
    """Per-client delays for authentication attempts after failed logins."""

    def __init__(
        self,
        base: float = 0.05,
        cap: float = 5.0,
        forget_after: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = 10000,
    ) -> None:
        if base <= 0 or cap < base or forget_after <= 0 or max_clients < 1:
            raise ValueError(
                "LoginThrottle needs 0 < base <= cap, forget_after > 0, max_clients >= 1"
            )
        self._base = base
        self._cap = cap
        self._forget_after = forget_after
        self._clock = clock
        self._max_clients = max_clients
        # Ordered by latest failure, oldest first: expiry and eviction pop from the front.
        self._clients: OrderedDict[str, _Failures] = OrderedDict()

    def __len__(self) -> int:
        """How many clients are remembered (for tests and monitoring)."""
        return len(self._clients)

    def delay(self, client: str) -> float:
        """Seconds to wait before answering an authentication attempt from ``client``."""
        self._expire()
        entry = self._clients.get(client)
        if entry is None:
            return 0.0
        # min() first: 2**count would overflow a float after ~1000 failures
        exponent = min(entry.count - 1, 64)
        return float(min(self._cap, self._base * 2**exponent))

    def failed(self, client: str) -> None:
        """Record a failed authentication attempt of ``client``."""
        self._expire()
        now = self._clock()
        entry = self._clients.pop(client, None)
        if entry is None:
            entry = _Failures(count=0, last=now)
        entry.count += 1
        entry.last = now
        self._clients[client] = entry
        while len(self._clients) > self._max_clients:
            self._clients.popitem(last=False)

    def succeeded(self, client: str) -> None:
        """Record a successful login of ``client``: it is no longer slowed down."""
        self._clients.pop(client, None)

    def _expire(self) -> None:
        """Forget the clients whose latest failure is older than ``forget_after``."""
        limit = self._clock() - self._forget_after
        while self._clients:
            oldest = next(iter(self._clients.values()))
            if oldest.last > limit:
                break
            self._clients.popitem(last=False)
