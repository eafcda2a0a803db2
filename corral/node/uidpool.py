"""Taking a uid from the cluster's uid pool for an instance (Ganeti's
``security_model=pool``; its RequestUnusedUid, ReleaseUid, ExecWithUnusedUid).

A uid is free when no lock on its lock file is held AND no process runs under
it.  The lock covers only the start of an instance, until its process runs
under the uid; from then on the process itself marks the uid as taken.  So a
uid stays taken after noded or masterd die while the instance's QEMU runs, is
free again once that QEMU is gone, and nothing stale is ever left to clean:
the lock files carry no state (they are never removed, which would let two
takers lock two different files of one name).  A lock file records the
instance that last took its uid, for reports only.

Locks are ``flock`` locks, which belong to one open file: they exclude the
threads of one noded as well as several noded processes.  Nodes of a test bed
that share one machine (and so one uid space) must share the lock directory:
``CORRAL_UID_POOL_DIR`` names it (default ``<run dir>/uid-pool``).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import itertools
import os
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path

from corral import errors, uidpool
from corral.paths import Paths

LOCK_DIR_ENV = "CORRAL_UID_POOL_DIR"
# As Ganeti's ensure-dirs makes its uid-pool lock directory.
_DIR_MODE = 0o750
_PROC = Path("/proc")


class TakenUid:
    """A uid taken for an instance that is being started: its lock is held
    until :meth:`started` (the instance's process runs under the uid) or
    :meth:`release` (the start failed)."""

    def __init__(self, pool: UidPool, uid: int, fd: int) -> None:
        self.pool = pool
        self.uid = uid
        self._fd: int | None = fd

    def started(self) -> None:
        """The instance's process runs under the uid now (for QEMU's ``-runas``:
        once QMP answers, since QEMU changes its uid before its main loop):
        drop the lock, the process keeps the uid taken."""
        self.pool._held.pop(self.uid, None)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def release(self) -> None:
        """Give the uid back (the start failed; nothing runs under it)."""
        self.pool.release(self.uid)


class UidPool:
    """The uid pool of this node: the ranges from its ssconf file, the lock
    files in ``lock_dir``."""

    def __init__(self, paths: Paths, lock_dir: Path | None = None) -> None:
        self.paths = paths
        env_dir = os.environ.get(LOCK_DIR_ENV)
        self.lock_dir = lock_dir or (Path(env_dir) if env_dir else paths.uid_pool_dir)
        # Uids this process has taken and not yet seen started.
        self._held: dict[int, TakenUid] = {}

    def ranges(self) -> list[list[int]]:
        """The cluster's pool as this node's ssconf file has it (empty without one)."""
        try:
            text = self.paths.ssconf_file("uid_pool").read_text()
        except FileNotFoundError:
            return []
        return uidpool.parse(text, "\n")

    async def take(self, owner: str) -> TakenUid:
        """A free uid, locked, for instance ``owner``; errors.LockError when the
        pool is empty or every uid of it is in use."""
        return await asyncio.to_thread(self.take_now, owner)

    @contextlib.asynccontextmanager
    async def running_with(self, owner: str) -> AsyncIterator[int]:
        """Ganeti's ExecWithUnusedUid: a free uid for the block, which starts
        the instance's process under it; the uid goes back to the pool if the
        block fails, and stays taken by the process otherwise."""
        taken = await self.take(owner)
        try:
            yield taken.uid
        except BaseException:
            taken.release()
            raise
        taken.started()

    def take_now(self, owner: str) -> TakenUid:
        """:meth:`take`, blocking (for a thread)."""
        ranges = _merged(self.ranges())
        if not ranges:
            raise errors.LockError(
                "The cluster's uid pool is empty; set one with gnt-cluster modify --uid-pool"
            )
        self.lock_dir.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
        busy = process_uids()
        contended = []
        # Uids that look free first; a busy one may have been freed meanwhile.
        free_first = itertools.chain(
            (uid for uid in _uids(ranges) if uid not in busy),
            sorted(uid for uid in busy if _in(ranges, uid)),
        )
        for uid in free_first:
            try:
                taken = self._try(uid, owner)
            except BlockingIOError:
                contended.append(uid)
                continue
            if taken is not None:
                return taken
        # Once more those that were locked: a lock held only for a moment
        # (a release, a taker that found the uid busy) may be gone.  Never
        # wait for one: its holder may be a start that takes long.
        for uid in contended:
            with contextlib.suppress(BlockingIOError):
                taken = self._try(uid, owner)
                if taken is not None:
                    return taken
        count = sum(high - low + 1 for low, high in ranges)
        raise errors.LockError(
            f"No free uid left in the cluster's uid pool ({count} uids, all in use);"
            " add uids with gnt-cluster modify --add-uids or stop an instance"
        )

    def _try(self, uid: int, owner: str) -> TakenUid | None:
        """``uid`` locked and recorded for ``owner`` if it is free, None if a
        process runs under it; BlockingIOError when another holds its lock."""
        fd = os.open(self._lock_file(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if uid_has_process(uid):
                os.close(fd)
                return None
            os.ftruncate(fd, 0)
            os.pwrite(fd, owner.encode() + b"\n", 0)
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
        taken = self._held[uid] = TakenUid(self, uid, fd)
        return taken

    def release(self, uid: int) -> None:
        """Ganeti's ReleaseUid: the instance that had ``uid`` is stopped.  The
        uid is free once no process runs under it; this forgets the owner it
        recorded, unless another start holds the uid's lock right now."""
        held = self._held.get(uid)
        if held is not None:
            held.started()  # drops the lock this process holds
        try:
            fd = os.open(self._lock_file(uid), os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if not uid_has_process(uid):
                os.ftruncate(fd, 0)
        except BlockingIOError:
            pass  # taken again already: the new owner's record stays
        finally:
            os.close(fd)

    def owner_of(self, uid: int) -> str | None:
        """The instance running under ``uid`` as recorded at its start; None
        when no process runs under it."""
        return self._record(uid) if uid_has_process(uid) else None

    def in_use(self) -> dict[int, str | None]:
        """Uids of the pool (or taken before they left it) that processes run
        under, with the instance recorded for each (None: not started through
        the pool)."""
        ranges = _merged(self.ranges())
        recorded = set()
        with contextlib.suppress(FileNotFoundError):
            recorded = {int(p.name) for p in self.lock_dir.iterdir() if p.name.isdigit()}
        return {
            uid: self._record(uid)
            for uid in sorted(process_uids())
            if uid in recorded or _in(ranges, uid)
        }

    def _record(self, uid: int) -> str | None:
        try:
            return self._lock_file(uid).read_text().strip() or None
        except FileNotFoundError:
            return None

    def _lock_file(self, uid: int) -> Path:
        return self.lock_dir / str(uid)


def _merged(ranges: list[list[int]]) -> list[tuple[int, int]]:
    """Overlapping or adjacent ranges joined, so that each uid is counted once."""
    out: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if out and low <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], high))
        else:
            out.append((low, high))
    return out


def _uids(ranges: Iterable[tuple[int, int]]) -> Iterator[int]:
    # Lazily: a pool may span the whole 32-bit uid space.
    return itertools.chain.from_iterable(range(low, high + 1) for low, high in ranges)


def _in(ranges: Iterable[tuple[int, int]], uid: int) -> bool:
    return any(low <= uid <= high for low, high in ranges)


def _status_uids(pid_dir: Path) -> list[int]:
    """The real, effective, saved and filesystem uids of a process ([] if gone,
    or a zombie: it holds nothing, and the init of a container may reap late)."""
    try:
        with open(pid_dir / "status", "rb") as status:
            for line in status:
                if line.startswith(b"State:") and line.split()[1:2] == [b"Z"]:
                    return []
                if line.startswith(b"Uid:"):
                    return [int(field) for field in line.split()[1:]]
    except OSError as err:
        if err.errno not in (errno.ENOENT, errno.ESRCH):
            raise
    return []


def _pid_dirs() -> Iterator[Path]:
    return (entry for entry in _PROC.iterdir() if entry.name.isdigit())


def process_uids() -> set[int]:
    """Every uid some process runs under (by any of its four uids)."""
    return {uid for pid_dir in _pid_dirs() for uid in _status_uids(pid_dir)}


def uid_has_process(uid: int) -> bool:
    """Whether some process runs under ``uid`` (Ganeti asks ``pgrep -u``)."""
    return any(uid in _status_uids(pid_dir) for pid_dir in _pid_dirs())
