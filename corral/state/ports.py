"""The master's durable state behind small asynchronous ports.

Four stores hold everything masterd must not lose: the configuration, the
job queue, a key-value store for the small things (the drain flag, the
watcher pause, join tokens, records of operations under way) and the
mastership.  Each is a protocol with one backend per kind of cluster:
SQLite on one node (``corral.state.sqlite``), etcd on master candidates
(``corral.state.etcd``).  The model is Patroni's ``AbstractDCS``:

- every write says what it read (an expected serial or version: a
  compare-and-set) and carries the writer's *fence token*;
- the fence token comes from the mastership lease; a store refuses a write
  whose token is older than the newest it has seen, so a deposed master
  cannot write even if it does not know yet that it was deposed;
- nothing here blocks the event loop: every call is a coroutine.

``tests/unit/test_store_contract.py`` is the suite every backend must pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from corral import errors

# Writes of code that holds no lease (creating a new cluster, tests of one
# store): older than every token a lease gives out.
NO_FENCE = 0


class Conflict(errors.ConfigurationError):
    """A write was refused: what it was based on changed meanwhile."""


class FencedOut(errors.ConfigurationError):
    """A write was refused: a newer master has written since (its token is newer)."""


class ChangesExpired(errors.ConfigurationError):
    """The changes asked for are no longer kept: load the whole state again."""


class LeaseLost(errors.ConfigurationError):
    """The mastership lease passed to another holder, or ran out."""


# The refusals every backend words the same way.
def deposed(what: str, newest: int, fence: int) -> FencedOut:
    """A write of ``what`` with token ``fence`` refused: ``newest`` wrote since."""
    return FencedOut(
        f"Refused to write {what}: a newer master daemon (fence token {newest}) writes"
        f" it now; this one (token {fence}) was deposed"
    )


def serial_conflict(stored: int, serial: int) -> Conflict:
    """A config change based on cluster serial ``serial`` refused: the store is at ``stored``."""
    return Conflict(
        f"The configuration is at serial {stored}, not {serial}: another"
        " process wrote it; restart the master daemon"
    )


def version_conflict(key: str, current: int, expected: int) -> Conflict:
    """A compare-and-set of state key ``key`` refused: it is at ``current``."""
    return Conflict(
        f"State key {key!r} is at version {current}, not the {expected} read; it changed meanwhile"
    )


def object_conflict(table: str, name: str, found: int | None, wanted: int | None) -> Conflict:
    """A config change refused: it read object ``name`` at ``wanted``, it is at ``found``."""
    return Conflict(
        f"Configuration object updated since it has been read: {table}"
        f" '{name}' is at serial {found}, the change read {wanted}"
    )


# The configuration
@dataclass
class ConfigChange:
    """Everything one logical unit changed: rows to write and rows to delete.

    ``expected`` says, per table and uuid, which serial number the unit read
    (None: the object must not exist yet); the store refuses the whole change
    if any row differs, so no job ever writes over another job's change.
    """

    upserts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    deletes: dict[str, list[str]] = field(default_factory=dict)
    expected: dict[str, dict[str, int | None]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.upserts or self.deletes)


@dataclass(frozen=True)
class ConfigSnapshot:
    """The whole configuration at one cluster serial: every object's data by table."""

    serial: int
    tables: dict[str, list[dict[str, Any]]]


@dataclass(frozen=True)
class SerialChange:
    """One committed change and the cluster serial it made."""

    serial: int
    change: ConfigChange


class ConfigStore(Protocol):
    """A durable home for the configuration objects."""

    async def load(self) -> ConfigSnapshot:
        """The configuration as last committed."""
        ...

    async def commit(self, change: ConfigChange, serial: int, fence: int) -> None:
        """Write ``change`` atomically as cluster serial ``serial``, if the store
        holds ``serial - 1`` and every object serial ``change.expected`` names
        (else Conflict) and ``fence`` is not older than any writer's it saw
        (else FencedOut); nothing is written when it refuses."""
        ...

    async def commit_many(
        self, changes: Sequence[ConfigChange], serial: int, fence: int
    ) -> list[Exception | None]:
        """Write ``changes`` in order, as :meth:`commit` would one after the
        other from ``serial`` on, in one durable write: each one refused (by
        Conflict, a clash of names, a row it cannot store) is left out and the
        next takes its serial; the refusals, None for each change written.
        FencedOut and faults of the store refuse them all (raised)."""
        ...

    async def changes(self, since: int, timeout: float) -> list[SerialChange]:
        """The changes committed after serial ``since``, oldest first; waits up
        to ``timeout`` seconds for one if there is none yet (then []).
        ChangesExpired if some of them are no longer kept."""
        ...

    async def close(self) -> None: ...


async def commit_one(store: ConfigStore, change: ConfigChange, serial: int, fence: int) -> None:
    """:meth:`ConfigStore.commit` as the backends make it: ``commit_many`` of
    the one change, its refusal raised."""
    (refused,) = await store.commit_many([change], serial, fence)
    if refused is not None:
        raise refused


# The job queue
# One log entry to write: (job id, opcode index, serial, timestamp, type, message).
LogRow = tuple[int, int, int, float, str, Any]
# One log entry read back: (opcode index, [serial, timestamp, type, message]).
LogEntryRow = tuple[int, list[Any]]


class JobStore(Protocol):
    """Jobs, their opcodes' states and their log entries, queued and archived."""

    async def insert_new(
        self, count: int, build: Callable[[list[int]], list[dict[str, Any]]], fence: int
    ) -> list[dict[str, Any]]:
        """Reserve ``count`` new job ids (after every id given so far), store
        the rows ``build(ids)`` makes of them and commit; the rows."""
        ...

    async def write_batch(
        self, rows: Sequence[dict[str, Any]], logs: Sequence[LogRow], fence: int
    ) -> None:
        """Update jobs and append log entries in one transaction."""
        ...

    async def archive(self, job_ids: Sequence[int], fence: int) -> int:
        """Move finished jobs (with their logs) to the archive; how many moved."""
        ...

    async def last_id(self) -> int:
        """The highest job id given out so far."""
        ...

    async def fetch(
        self, job_ids: Sequence[int] | None, columns: Sequence[str], archived: bool = False
    ) -> list[dict[str, Any]]:
        """Rows (``id``, ``archived`` and ``columns``) of these jobs (None: all),
        by id; the archive too if ``archived``."""
        ...

    async def fetch_logs(
        self, job_id: int, after: int = 0, archived: bool = False
    ) -> list[LogEntryRow]:
        """The job's log entries with a serial above ``after``, in order."""
        ...

    async def unfinished_ids(self) -> list[int]: ...

    async def finished_before(self, timestamp: float | None) -> list[int]:
        """Finished, not archived jobs that ended before ``timestamp`` (None: all)."""
        ...

    async def close(self) -> None: ...


# Small durable state
@dataclass(frozen=True)
class Versioned:
    """A value and the version that wrote it (versions grow with every write)."""

    value: Any
    version: int


class KeyValueStore(Protocol):
    """JSON values under string keys, each with a version for compare-and-set."""

    async def get(self, key: str) -> Versioned | None: ...

    async def scan(self, prefix: str) -> dict[str, Versioned]:
        """Every key that starts with ``prefix``."""
        ...

    async def put(self, key: str, value: Any, fence: int, expected: int | None = None) -> int:
        """Store ``value``; with ``expected``, only if the key is at that version
        (0: only if it does not exist), else Conflict.  The new version."""
        ...

    async def delete(self, key: str, fence: int, expected: int | None = None) -> bool:
        """Remove the key (with ``expected``: only at that version, else
        Conflict); whether it existed."""
        ...

    async def close(self) -> None: ...


# Mastership
@dataclass(frozen=True)
class Lease:
    """The mastership as one holder got it: ``token`` orders every lease ever
    given (the fence token of its writes); ``expires`` is a time.time()."""

    holder: str
    token: int
    expires: float


class Mastership(Protocol):
    """Who may act as the master, for how long, with which fence token."""

    async def acquire(self, holder: str, ttl: float) -> Lease:
        """Become the master for ``ttl`` seconds, with a token newer than any
        given before; LeaseLost if another holder's lease still runs."""
        ...

    async def renew(self, lease: Lease, ttl: float) -> Lease:
        """Extend ``lease``; LeaseLost if it is no longer the current one."""
        ...

    async def release(self, lease: Lease) -> None:
        """Give the mastership up (nothing happens if ``lease`` is not current)."""
        ...

    async def current(self) -> Lease | None:
        """The lease that runs now, if any."""
        ...

    async def close(self) -> None: ...


class HandOver(Protocol):
    """A mastership that several candidates stand by for (etcd's; a one-node
    cluster has none): the master may hand it over to a candidate named."""

    async def wait_released(self, timeout: float) -> None:
        """Return once the mastership may be free (released, run out, handed
        over) or after ``timeout`` seconds."""
        ...

    async def request(self, to: str, ttl: float) -> None:
        """Ask the master to hand the mastership over to ``to``; the request
        lapses after ``ttl`` seconds (others may then acquire it again)."""
        ...

    async def wanted(self, holder: str, timeout: float) -> str | None:
        """The candidate the mastership of ``holder`` is asked to go to, once
        asked (None after ``timeout`` seconds without)."""
        ...
