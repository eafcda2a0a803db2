"""masterd's hold on the mastership: the lease, kept renewed, and what losing it means.

masterd acquires the lease before it writes anything; the lease's token is
the fence token of every write it makes.  A task renews the lease a third of
its time-to-live apart.  Should it be lost (another master took over), this
master stops at once: its writes are refused from then on anyway (fenced),
and it must not go on answering clients as if it were the master.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket

from corral.state.ports import Lease, LeaseLost, Mastership

log = logging.getLogger(__name__)

# Seconds a lease runs without renewal (masterd's --lease-ttl).
LEASE_TTL = 30.0


class MastershipKeeper:
    """Holds the mastership for one masterd, ``ttl`` seconds at a time;
    ``lost`` is set if it goes (``reason`` says why)."""

    def __init__(self, mastership: Mastership, ttl: float = LEASE_TTL) -> None:
        self._mastership = mastership
        self._ttl = ttl
        self._task: asyncio.Task[None] | None = None
        self.lease: Lease | None = None
        self.lost = asyncio.Event()
        self.reason = ""

    async def acquire(self) -> Lease:
        """Become the master (a token newer than every earlier master's)."""
        self.lease = await self._mastership.acquire(socket.gethostname(), self._ttl)
        log.info("Mastership acquired (fence token %d)", self.lease.token)
        self._task = asyncio.get_running_loop().create_task(self._renew(), name="mastership")
        return self.lease

    async def _renew(self) -> None:
        while self.lease is not None:
            await asyncio.sleep(self._ttl / 3)
            try:
                self.lease = await self._mastership.renew(self.lease, self._ttl)
            except LeaseLost as err:
                log.error("%s; this master daemon stops", err.message)
                self.lease = None
                self.reason = err.message
                self.lost.set()
            except Exception:
                # The store may answer again before the lease runs out.
                log.exception("Cannot renew the mastership lease")

    @property
    def ttl(self) -> float:
        return self._ttl

    def hand_over(self, mastership: Mastership, lease: Lease) -> Mastership:
        """Keep ``lease`` of ``mastership`` from now on (the stores moved and the
        mastership with them, same token); the former mastership, to release."""
        if self._task is not None:
            self._task.cancel()  # a renewal under way would renew the former
        former, self._mastership, self.lease = self._mastership, mastership, lease
        self._task = asyncio.get_running_loop().create_task(self._renew(), name="mastership")
        return former

    async def release(self) -> None:
        """Stop renewing and give the mastership up."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.lease is not None:
            await self._mastership.release(self.lease)
            self.lease = None
