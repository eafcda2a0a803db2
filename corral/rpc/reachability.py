"""Which nodes did not answer lately, and the deadline of the query being answered.

A node that refused or did not finish a connection, or did not answer in time,
is remembered as unreachable for ``memory`` seconds after its last failure;
any answer from it (even an error) forgets it at once.  The RPC client
(:mod:`corral.rpc.client`) consults this memory: inside
:func:`query_deadline` a remembered node is not asked at all (the query
answers without its data), outside it (logical units) the node is still asked,
with a short connect timeout.

Stdlib only: the RPC client and the query layer import it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

log = logging.getLogger(__name__)

# One deadline for all node calls of one query.  Ganeti gives a node RPC_CONNECT_TIMEOUT
# (5 s) to accept a connection, so an unreachable node cost a Ganeti query 5 s too.
DEFAULT_QUERY_DEADLINE = 5.0
# How long a node that failed is not waited on by queries (renewed by each failure).
DEFAULT_MEMORY = 30.0
# A remembered node is probed in the background at most this often (seconds),
# so that it is forgotten soon after it answers again.
PROBE_INTERVAL = 2.0

_DEADLINE: ContextVar[float | None] = ContextVar("corral_query_deadline", default=None)


@contextmanager
def query_deadline(seconds: float) -> Iterator[float]:
    """Make every node call inside the block (and its tasks) a query call that
    answers by ``seconds`` from now; yields the deadline (``time.monotonic``).

    A deadline already in force stays if it is earlier.
    """
    deadline = time.monotonic() + seconds
    outer = _DEADLINE.get()
    if outer is not None:
        deadline = min(deadline, outer)
    token = _DEADLINE.set(deadline)
    try:
        yield deadline
    finally:
        _DEADLINE.reset(token)


def current_deadline() -> float | None:
    """The deadline of the query being answered (None outside queries)."""
    return _DEADLINE.get()


@dataclass
class Down:
    """A node remembered as unreachable."""

    node: str
    since: float  # wall-clock time of the first failure in a row (for messages)
    last: float  # monotonic time of the latest failure
    reason: str

    def describe(self) -> str:
        """``unreachable since HH:MM:SS (reason)``."""
        since = time.strftime("%H:%M:%S", time.localtime(self.since))
        return f"unreachable since {since} ({self.reason})"


class Reachability:
    """The nodes (by address) that failed lately; ``memory`` seconds after
    their last failure they are forgotten and asked again."""

    def __init__(
        self, memory: float = DEFAULT_MEMORY, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.memory = memory
        self._clock = clock
        self._down: dict[str, Down] = {}

    def failed(self, node: str, address: str, reason: str) -> None:
        """Remember that ``node`` at ``address`` could not be reached."""
        now = self._clock()
        known = self.down(address)
        if known is not None:
            known.last, known.reason = now, reason
            return
        self._down[address] = Down(node, time.time(), now, reason)
        log.warning(
            "Node %s (%s) unreachable: %s; queries skip it for %g s",
            node,
            address,
            reason,
            self.memory,
        )

    def answered(self, address: str) -> None:
        """Forget a failure of the node at ``address``: it answered."""
        down = self._down.pop(address, None)
        if down is not None:
            log.info("Node %s (%s) reachable again", down.node, address)

    def down(self, address: str) -> Down | None:
        """The remembered failure of the node at ``address``, if still remembered."""
        down = self._down.get(address)
        if down is not None and self._clock() - down.last >= self.memory:
            del self._down[address]
            return None
        return down

    def probe_due(self, address: str) -> bool:
        """Whether a remembered node was last tried ``PROBE_INTERVAL`` ago or more."""
        down = self.down(address)
        return down is not None and self._clock() - down.last >= PROBE_INTERVAL
