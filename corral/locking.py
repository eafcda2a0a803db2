"""The lock manager of masterd: named locks in levels, shared or exclusive.

Locks are taken level by level (cluster, instance, nodegroup, node,
node-res, network) and by name within a level, so two jobs can never wait
for each other in a cycle.  Waiters are served by priority, then in arrival
order; a shared request does not overtake an exclusive one queued before it,
so writers are not starved.  Owners are jobs, named by their id.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from corral import constants as C
from corral import errors

LOCKSET = "[lockset]"
MODE_SHARED = "shared"
MODE_EXCLUSIVE = "exclusive"

_LEVEL_INDEX = {level: idx for idx, level in enumerate(C.LOCK_LEVELS)}
_seq = itertools.count()


@dataclass(eq=False)
class _Waiter:
    owner: str
    shared: bool
    priority: int
    future: asyncio.Future[None]
    seq: int = field(default_factory=lambda: next(_seq))

    @property
    def key(self) -> tuple[int, int]:
        return (self.priority, self.seq)


@dataclass(eq=False)
class _Lock:
    name: str
    exclusive: str | None = None
    shared: set[str] = field(default_factory=set)
    waiters: list[_Waiter] = field(default_factory=list)

    def free_for(self, waiter: _Waiter) -> bool:
        return self.free_in(waiter.shared)

    def free_in(self, shared: bool) -> bool:
        """Whether the lock can be held in that mode now (ignoring the queue)."""
        if self.exclusive is not None:
            return False
        return shared or not self.shared

    def grant_waiters(self) -> None:
        """Wake waiters at the head of the queue that can now hold the lock."""
        while self.waiters:
            head = self.waiters[0]
            if head.future.done():
                self.waiters.pop(0)
                continue
            if not self.free_for(head):
                return
            self.waiters.pop(0)
            self._take(head.owner, head.shared)
            head.future.set_result(None)
            if not head.shared:
                return

    def _take(self, owner: str, shared: bool) -> None:
        if shared:
            self.shared.add(owner)
        else:
            self.exclusive = owner

    def release(self, owner: str) -> None:
        if self.exclusive == owner:
            self.exclusive = None
        self.shared.discard(owner)
        self.grant_waiters()


def full_name(level: str, name: str) -> str:
    return f"{level}/{name}"


class LockManager:
    """All locks of the cluster, created on first use."""

    def __init__(self) -> None:
        self._locks: dict[str, _Lock] = {}
        self._owned: dict[str, dict[str, set[str]]] = {}
        # Opportunistic requests waiting for any lock to be released.
        self._watchers: list[asyncio.Future[None]] = []

    def _lock(self, level: str, name: str) -> _Lock:
        key = full_name(level, name)
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = _Lock(key)
        return lock

    async def acquire(
        self,
        owner: str,
        level: str,
        names: Iterable[str],
        *,
        shared: bool,
        priority: int = C.OP_PRIO_NORMAL,
    ) -> None:
        """Acquire ``names`` at ``level``, in name order; all or none on cancel."""
        held = self._check_order(owner, level)
        got: list[str] = []
        try:
            for name in sorted(set(names)):
                if name in held.get(level, set()):
                    continue
                await self._acquire_one(owner, self._lock(level, name), shared, priority)
                held.setdefault(level, set()).add(name)
                got.append(name)
        except BaseException:
            self.release(owner, level, got)
            raise

    def _check_order(self, owner: str, level: str) -> dict[str, set[str]]:
        """``owner``'s locks, once a request at ``level`` is known to keep the order."""
        if level not in _LEVEL_INDEX:
            raise errors.ProgrammerError(f"Unknown lock level {level!r}")
        held = self._owned.setdefault(owner, {})
        later = [lvl for lvl in held if held[lvl] and _LEVEL_INDEX[lvl] > _LEVEL_INDEX[level]]
        if later:
            raise errors.ProgrammerError(
                f"{owner} asks for level {level} while holding {later[0]}: wrong lock order"
            )
        if held.get(level):
            # A second request at a held level could take names out of order.
            raise errors.ProgrammerError(f"{owner} already holds locks at level {level}")
        return held

    async def acquire_available(
        self, owner: str, level: str, names: Iterable[str], *, shared: bool, at_least: int = 1
    ) -> list[str]:
        """Ganeti's opportunistic acquisition: those of ``names`` that are free
        now (and nobody queues for), without waiting for the others; while
        fewer than ``at_least`` are, wait for a release.  The names taken."""
        held = self._check_order(owner, level)
        wanted = sorted(set(names))
        while True:
            free = [n for n in wanted if self._available(level, n, shared)]
            if len(free) >= min(at_least, len(wanted)):
                for name in free:
                    self._lock(level, name)._take(owner, shared)
                    held.setdefault(level, set()).add(name)
                return free
            watcher = asyncio.get_running_loop().create_future()
            self._watchers.append(watcher)
            try:
                await watcher
            finally:
                if watcher in self._watchers:
                    self._watchers.remove(watcher)

    def _available(self, level: str, name: str, shared: bool) -> bool:
        lock = self._locks.get(full_name(level, name))
        return lock is None or (not lock.waiters and lock.free_in(shared))

    def _wake_watchers(self) -> None:
        watchers, self._watchers = self._watchers, []
        for watcher in watchers:
            if not watcher.done():
                watcher.set_result(None)

    async def _acquire_one(self, owner: str, lock: _Lock, shared: bool, priority: int) -> None:
        waiter = _Waiter(owner, shared, priority, asyncio.get_running_loop().create_future())
        if not lock.waiters and lock.free_for(waiter):
            lock._take(owner, shared)
            return
        lock.waiters.append(waiter)
        lock.waiters.sort(key=lambda w: w.key)
        try:
            await waiter.future
        except BaseException:
            if waiter.future.done() and not waiter.future.cancelled():
                lock.release(owner)  # granted just as we were cancelled
            elif waiter in lock.waiters:
                lock.waiters.remove(waiter)
                lock.grant_waiters()
            self._forget_if_idle(lock)
            self._wake_watchers()
            raise

    def release(
        self, owner: str, level: str | None = None, names: Iterable[str] | None = None
    ) -> None:
        """Release some or all locks of ``owner``."""
        held = self._owned.get(owner, {})
        levels = [level] if level is not None else list(held)
        for lvl in levels:
            owned = held.get(lvl, set())
            for name in list(owned if names is None else names):
                if name in owned:
                    owned.discard(name)
                    lock = self._locks[full_name(lvl, name)]
                    lock.release(owner)
                    self._forget_if_idle(lock)
        if not any(held.values()):
            self._owned.pop(owner, None)
        self._wake_watchers()

    def _forget_if_idle(self, lock: _Lock) -> None:
        if lock.exclusive is None and not lock.shared and not lock.waiters:
            self._locks.pop(lock.name, None)

    def owned(self, owner: str, level: str) -> set[str]:
        return set(self._owned.get(owner, {}).get(level, set()))

    def set_priority(self, owner: str, priority: int) -> None:
        """Move the owner's pending requests to a new priority."""
        for lock in self._locks.values():
            changed = False
            for waiter in lock.waiters:
                if waiter.owner == owner:
                    waiter.priority = priority
                    changed = True
            if changed:
                lock.waiters.sort(key=lambda w: w.key)
                lock.grant_waiters()

    def info(self) -> list[dict[str, Any]]:
        """Every lock that is held or waited for, with owners and waiters."""
        out = []
        for name in sorted(self._locks):
            lock = self._locks[name]
            if lock.exclusive is not None:
                mode, owners = MODE_EXCLUSIVE, [lock.exclusive]
            elif lock.shared:
                mode, owners = MODE_SHARED, sorted(lock.shared)
            else:
                mode, owners = None, []
            pending = [
                [MODE_SHARED if w.shared else MODE_EXCLUSIVE, [w.owner]]
                for w in lock.waiters
                if not w.future.done()
            ]
            out.append({"name": name, "mode": mode, "owner": owners, "pending": pending})
        return out
