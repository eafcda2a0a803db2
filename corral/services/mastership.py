"""masterd's hold on the mastership: the lease, kept renewed, and what losing it means.

masterd acquires the lease before it writes anything; the lease's token is
the fence token of every write it makes.  A task renews the lease a third of
its time-to-live apart.  Should it be lost (another master took over), or be
about to run out without a renewal (the store does not answer), this master
stops at once: its writes are refused from then on anyway (fenced), and it
must not go on answering clients as if it were the master.

Where the stores live in etcd, every master candidate runs masterd: those
that do not hold the lease stand by until it is free (:meth:`acquire` waits),
and the master watches for a request to hand the mastership over
(``gnt-cluster master-failover`` on the candidate that wants it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from corral import errors
from corral.state.ports import HandOver, Lease, LeaseLost, Mastership

log = logging.getLogger(__name__)

# Seconds a candidate standing by waits before it asks a store that did not
# answer again.
STORE_RETRY = 1.0
# Seconds a lease runs without renewal (masterd's --lease-ttl): how long a
# dead master keeps the others standing by (automatic failover takes about
# that long), and how long a master may go without reaching the store.
LEASE_TTL = 8.0


class MastershipKeeper:
    """Holds the mastership for one masterd (``holder``: its node's name),
    ``ttl`` seconds at a time; ``lost`` is set if it goes (``reason`` says
    why, ``handed_to`` names the candidate it was handed over to)."""

    def __init__(
        self,
        mastership: Mastership,
        holder: str,
        ttl: float = LEASE_TTL,
        handover: HandOver | None = None,
    ) -> None:
        self._mastership = mastership
        self.holder = holder
        self._ttl = ttl
        self._handover = handover
        self._tasks: list[asyncio.Task[None]] = []
        self.lease: Lease | None = None
        self.lost = asyncio.Event()
        self.reason = ""
        self.handed_to: str | None = None
        self._attempt = asyncio.Lock()  # one attempt at the mastership at a time

    @property
    def ttl(self) -> float:
        return self._ttl

    @property
    def contested(self) -> bool:
        """Whether other candidates stand by for the mastership (etcd)."""
        return self._handover is not None

    async def acquire(
        self,
        standing_by: Callable[[str], None] | None = None,
        eligible: Callable[[], Awaitable[bool]] | None = None,
    ) -> Lease:
        """Become the master (a token newer than every earlier master's).  Where
        candidates stand by, wait while another holds the mastership (first
        telling ``standing_by`` why) or while ``eligible`` says this node may
        not be the master (it is no master candidate)."""
        while True:
            if eligible is not None and not await eligible():
                if standing_by is not None:
                    standing_by(f"{self.holder} is not a master candidate")
                    standing_by = None
                await asyncio.sleep(self._ttl / 3)  # candidates change rarely
                continue
            try:
                async with self._attempt:
                    self.lease = await self._mastership.acquire(self.holder, self._ttl)
                break
            except LeaseLost as err:
                if self._handover is None:
                    raise
                if standing_by is not None:
                    standing_by(err.message)
                    standing_by = None
                await self._wait_released(self._handover)
            except errors.GenericError as err:  # the store does not answer now
                if self._handover is None:
                    raise
                log.warning("Cannot ask for the mastership (trying again): %s", err.message)
                await asyncio.sleep(STORE_RETRY)
        log.info("Mastership acquired by %s (fence token %d)", self.holder, self.lease.token)
        self._start()
        return self.lease

    @contextlib.asynccontextmanager
    async def held_off(self) -> AsyncIterator[None]:
        """No attempt at the mastership while the block runs (one under way
        ends first): the store is being changed under this candidate."""
        async with self._attempt:
            yield

    async def _wait_released(self, handover: HandOver) -> None:
        try:
            await handover.wait_released(self._ttl)
        except errors.GenericError as err:  # a member went away: ask again
            log.warning("Cannot watch the mastership (trying again): %s", err.message)
            await asyncio.sleep(STORE_RETRY)

    def _start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._renew(), name="mastership")]
        if self._handover is not None:
            self._tasks.append(loop.create_task(self._watch(self._handover), name="handover"))

    def _lose(self, reason: str) -> None:
        log.error("%s; this master daemon stops", reason)
        self.reason = reason
        self.lost.set()

    async def _renew(self) -> None:
        while self.lease is not None:
            await asyncio.sleep(self._ttl / 3)
            # A renewal that has not come back by then is given up: a master
            # must stop before another can take the lease over.
            left = self.lease.expires - time.time() - self._ttl / 6
            try:
                async with asyncio.timeout(max(left, 0.0)):
                    self.lease = await self._mastership.renew(self.lease, self._ttl)
            except LeaseLost as err:
                self.lease = None
                self._lose(err.message)
            except Exception as err:  # the store may answer again in time
                log.warning("Cannot renew the mastership lease: %r", err)
                if time.time() > self.lease.expires - self._ttl / 3:
                    self._lose("The mastership lease could not be renewed before it runs out")
                    return

    async def _watch(self, handover: HandOver) -> None:
        """Until a hand-over to another candidate is asked for (errors: looked at again)."""
        while not self.lost.is_set():
            try:
                wanted = await handover.wanted(self.holder, self._ttl)
            except Exception:
                log.exception("Cannot watch for a hand-over of the mastership")
                await asyncio.sleep(1.0)
                continue
            if wanted is not None:
                self.handed_to = wanted
                self._lose(f"The mastership is handed over to {wanted}")

    def hand_over(
        self, mastership: Mastership, lease: Lease, handover: HandOver | None
    ) -> Mastership:
        """Keep ``lease`` of ``mastership`` from now on (the stores moved and the
        mastership with them, same token); the former mastership, to release."""
        self._stop_tasks()  # a renewal under way would renew the former
        former, self._mastership, self.lease = self._mastership, mastership, lease
        self._handover = handover
        self._start()
        return former

    async def pause(self) -> None:
        """Stop renewing for a moment (the stores move back: their last steps
        change the mastership's key); :meth:`resume` or :meth:`hand_over` next."""
        self._stop_tasks()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    def resume(self) -> None:
        """Renew again after :meth:`pause` (the move back failed)."""
        if not self._tasks:
            self._start()

    def _stop_tasks(self) -> None:
        for task in self._tasks:
            task.cancel()

    async def release(self) -> None:
        """Stop renewing and give the mastership up."""
        self._stop_tasks()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self.lease is not None:
            with contextlib.suppress(Exception):  # it runs out by itself otherwise
                await self._mastership.release(self.lease)
            self.lease = None
