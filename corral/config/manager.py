"""masterd's view of the configuration: objects in memory, changes in transactions.

Reads see the last committed state.  A logical unit changes copies of objects
inside a ``ConfigTransaction``; ``commit`` writes all of them to the store in
one transaction (off the event loop), bumps their serial numbers and the
cluster serial, and only then makes them visible.  A unit that fails leaves
memory and disk untouched.  Commits happen in order, each carrying the
master's fence token (``fence``, from its mastership lease); those that come
while one is being written are written together next, in one store write
(group commit: a burst of jobs pays one sync and one trip to the store's
thread, not one each).
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from typing import Any, TypeVar, cast

from corral import constants as C
from corral import errors
from corral.nicesort import nice_key
from corral.objects import (
    Cluster,
    ConfigObject,
    DetachedDisk,
    Instance,
    Network,
    Node,
    NodeGroup,
)
from corral.objects.filter_rule import FilterRule
from corral.state.ports import NO_FENCE, ConfigChange, ConfigSnapshot, ConfigStore, SerialChange
from corral.storage import templates
from corral.storage.reservations import Reservations

T = TypeVar("T", bound=ConfigObject)
# How many commits' changes the manager keeps for changes_since.
CHANGES_KEPT = 1_000
# One commit's changes: the objects written, and those removed.
Change = tuple[list[ConfigObject], list[ConfigObject]]

# What users call the objects of each table, in messages ("Node group 'x' not known").
KIND_NAMES: dict[str, str] = {
    "nodes": "Node",
    "nodegroups": "Node group",
    "instances": "Instance",
    "networks": "Network",
}
# How an unknown name is reported, where Ganeti's words differ from "not known".
_UNKNOWN: dict[str, str] = {"networks": "Network '{}' not found"}

_CLASSES: dict[str, type[ConfigObject]] = {
    cls.TABLE: cls
    for cls in (Cluster, NodeGroup, Node, Instance, Network, FilterRule, DetachedDisk)
}


def _nice_order(name: str) -> tuple[list[tuple[int, Any]], str]:
    """Ganeti's nice order; names it finds equal ("a01", "a1") by their text."""
    return nice_key(name), name


def _error_of(write: asyncio.Future[Any]) -> Exception | None:
    """Why a finished store write wrote nothing (None: it wrote)."""
    if write.cancelled():
        return errors.OpExecError("The configuration commit was cancelled")
    error = write.exception()
    if error is None or isinstance(error, Exception):
        return error
    raise error  # not an error of the write: KeyboardInterrupt, SystemExit


class _Pending:
    """One transaction's commit, waiting to be written with the others."""

    def __init__(self, upserts: list[ConfigObject], deletes: list[ConfigObject]) -> None:
        self.upserts, self.deletes = upserts, deletes
        self.done = False
        self.error: Exception | None = None
        # Staged copies carry the serial they were read at: the store compares.
        self._staged = [(obj, obj.serial_no, obj.mtime) for obj in upserts]

    def stage(self, committed: dict[str, dict[str, ConfigObject]], now: float) -> ConfigChange:
        """The change to write; the staged copies' serials bumped for it."""
        change = ConfigChange()
        for obj in self.upserts:
            known = obj.uuid in committed[obj.TABLE]
            change.expected.setdefault(obj.TABLE, {})[obj.uuid] = obj.serial_no if known else None
            if known:
                obj.serial_no += 1
                obj.mtime = now
            change.upserts.setdefault(obj.TABLE, []).append(obj.model_dump())
        for obj in self.deletes:
            change.expected.setdefault(obj.TABLE, {})[obj.uuid] = obj.serial_no
            change.deletes.setdefault(obj.TABLE, []).append(obj.uuid)
        return change

    def end(self, error: Exception | None) -> None:
        """Written (None), or refused: the staged copies as they were read."""
        if error is not None:
            for obj, serial_no, mtime in self._staged:
                obj.serial_no, obj.mtime = serial_no, mtime
        self.done, self.error = True, error


class ConfigManager:
    """The committed configuration, kept in memory for fast queries."""

    def __init__(self, store: ConfigStore, snapshot: ConfigSnapshot) -> None:
        self._store = store
        self.serial, tables = snapshot.serial, snapshot.tables
        # The fence token of this master's writes (masterd sets its lease's).
        self.fence = NO_FENCE
        self._commit_lock = asyncio.Lock()
        self._pending: list[_Pending] = []  # commits waiting for the writer
        self._objects: dict[str, dict[str, ConfigObject]] = {}
        self._by_name: dict[str, dict[str, ConfigObject]] = {}
        for table, cls in _CLASSES.items():
            objs = [cls.model_validate(row) for row in tables.get(table, [])]
            self._objects[table] = {o.uuid: o for o in objs}
            self._by_name[table] = {o.name: o for o in objs}
        if len(self._objects["cluster"]) != 1:
            raise errors.ConfigurationError("The configuration holds no cluster object")
        # The time of the last commit (Ganeti's config mtime): at the start,
        # the newest object's.
        self.mtime = max(o.mtime for table in self._objects.values() for o in table.values())
        # The last commits' changes by serial, for who follows them
        # (config.data's renderer: its work then grows with the changes).
        self._changes: deque[tuple[int, list[ConfigObject], list[ConfigObject]]] = deque(
            maxlen=CHANGES_KEPT
        )
        self._listeners: list[Callable[[ConfigManager, set[str]], None]] = []
        # Told the seconds of each successful commit to the store (masterd's metrics).
        self.commit_timer: Callable[[float], None] = lambda seconds: None
        # NIC addresses of all instances, kept up to date on every commit, so that
        # creating an instance does not scan every other one: the IPs of NICs
        # without a network, and per network (uuid) those of the NICs on it.
        self._macs: set[str] = set()
        self._ips: dict[str, str] = {}
        self._net_ips: dict[str, dict[str, str]] = {}
        for inst in self._all(Instance):
            templates.fill_disk_nodes(inst)
            self._index_nics(inst, add=True)
        # What running jobs reserved for instances they have not committed yet.
        self.reservations = Reservations()
        # Per table, the names in Ganeti's nice order, sorted once when first
        # asked for, then kept in order as objects come, go and are renamed.
        self._nice_names: dict[str, list[str]] = {}
        self._names_version: dict[str, int] = {}  # per table, counts changes of its names

    @classmethod
    async def open(cls, store: ConfigStore) -> ConfigManager:
        """The configuration as ``store`` holds it."""
        return cls(store, await store.load())

    def follow(self, found: SerialChange) -> None:
        """Apply a change another master committed (a candidate standing by
        follows the store: corral.services.config_follower)."""
        if found.serial != self.serial + 1:
            raise errors.ConfigurationError(
                f"Configuration change {found.serial} does not follow serial {self.serial}"
            )
        upserts: list[ConfigObject] = []
        for table, rows in found.change.upserts.items():
            for row in rows:
                obj = _CLASSES[table].model_validate(row)
                if isinstance(obj, Instance):
                    templates.fill_disk_nodes(obj)
                upserts.append(obj)
        deletes = [
            self._objects[table][uuid]
            for table, uuids in found.change.deletes.items()
            for uuid in uuids
            if uuid in self._objects[table]
        ]
        self.mtime = max([self.mtime, *(obj.mtime for obj in upserts)])
        self._show(upserts, deletes)

    def add_listener(self, callback: Callable[[ConfigManager, set[str]], None]) -> None:
        """Call ``callback(cfg, changed_tables)`` after every commit."""
        self._listeners.append(callback)

    def _index_nics(self, inst: Instance, *, add: bool) -> None:
        for nic in inst.nics:
            ips = self._ips if nic.network is None else self._net_ips.setdefault(nic.network, {})
            if add:
                self._macs.add(nic.mac)
                if nic.ip:
                    ips[nic.ip] = inst.name
            else:
                self._macs.discard(nic.mac)
                if nic.ip and ips.get(nic.ip) == inst.name:
                    del ips[nic.ip]

    def used_macs(self) -> set[str]:
        """Every MAC address of every instance (a copy)."""
        return set(self._macs)

    def ip_owner(self, ip: str, network: str | None = None) -> str | None:
        """The instance whose NIC on ``network`` (uuid; None: no network) has this IP."""
        ips = self._ips if network is None else self._net_ips.get(network, {})
        return ips.get(ip)

    def network_ips(self, network: str) -> dict[str, str]:
        """The IPs of the NICs on ``network`` (uuid), each with its instance's name."""
        return dict(self._net_ips.get(network, {}))

    async def close(self) -> None:
        await self._store.close()

    # Reads
    @property
    def cluster(self) -> Cluster:
        obj = next(iter(self._objects["cluster"].values()))
        assert isinstance(obj, Cluster)
        return obj

    def _all(self, cls: type[T]) -> Iterator[T]:
        for obj in self._objects[cls.TABLE].values():
            assert isinstance(obj, cls)
            yield obj

    def table(self, cls: type[T]) -> list[T]:
        """Every object of ``cls``, in no order (cheap: no sorting)."""
        return cast(list[T], list(self._objects[cls.TABLE].values()))

    def changes_since(self, serial: int) -> list[Change] | None:
        """The commits after ``serial``, in order, as (upserts, deletes);
        None if they are no longer all kept."""
        if serial >= self.serial:
            return []
        if not self._changes or self._changes[0][0] > serial + 1:
            return None
        start = bisect.bisect_right(self._changes, serial, key=lambda change: change[0])
        return [(upserts, deletes) for _, upserts, deletes in islice(self._changes, start, None)]

    def nodes(self) -> list[Node]:
        return sorted(self._all(Node), key=lambda n: n.name)

    def groups(self) -> list[NodeGroup]:
        return sorted(self._all(NodeGroup), key=lambda g: g.name)

    def instances(self) -> list[Instance]:
        return sorted(self._all(Instance), key=lambda i: i.name)

    def nice_names(self, cls: type[ConfigObject]) -> Sequence[str]:
        """The names of every object of ``cls`` in Ganeti's nice order (the
        manager's own list, kept in order by each commit: read, do not keep)."""
        names = self._nice_names.get(cls.TABLE)
        if names is None:
            names = self._nice_names[cls.TABLE] = sorted(self._by_name[cls.TABLE], key=_nice_order)
        return names

    def names_version(self, cls: type[ConfigObject]) -> int:
        """A number that changes whenever an object of ``cls`` comes, goes or is renamed."""
        return self._names_version.get(cls.TABLE, 0)

    def _renamed(self, table: str, old: str | None, new: str | None) -> None:
        """Keep the table's nice order of names (if made) as ``old`` goes and ``new`` comes."""
        self._names_version[table] = self._names_version.get(table, 0) + 1
        names = self._nice_names.get(table)
        if names is None:
            return
        if old is not None:
            del names[bisect.bisect_left(names, _nice_order(old), key=_nice_order)]
        if new is not None:
            bisect.insort(names, new, key=_nice_order)

    def networks(self) -> list[Network]:
        return sorted(self._all(Network), key=lambda n: n.name)

    def detached_disks(self) -> list[DetachedDisk]:
        """The disks no instance has (detached), in no particular order."""
        return list(self._all(DetachedDisk))

    def filter_rules(self) -> list[FilterRule]:
        """The job filter rules (in no particular order)."""
        return list(self._all(FilterRule))

    def instance_count(self) -> int:
        return len(self._objects[Instance.TABLE])

    def get(self, cls: type[T], uuid: str) -> T | None:
        obj = self._objects[cls.TABLE].get(uuid)
        return obj if isinstance(obj, cls) else None

    def find(self, cls: type[T], name: str) -> T | None:
        obj = self._by_name[cls.TABLE].get(name)
        return obj if isinstance(obj, cls) else None

    def lookup(self, cls: type[T], name_or_uuid: str) -> T:
        """The object with this name (or uuid), or a clear unknown-entity error."""
        obj = self.find(cls, name_or_uuid) or self.get(cls, name_or_uuid)
        if obj is None:
            what = KIND_NAMES.get(cls.TABLE, cls.__name__)
            message = _UNKNOWN.get(cls.TABLE, what + " '{}' not known")
            raise errors.OpPrereqError(message.format(name_or_uuid), C.ECODE_NOENT)
        return obj

    @property
    def master_node(self) -> Node:
        node = self.get(Node, self.cluster.master_node)
        if node is None:
            raise errors.ConfigurationError("The master node is not in the configuration")
        return node

    def transaction(self) -> ConfigTransaction:
        return ConfigTransaction(self)

    # Called by ConfigTransaction.commit
    async def _apply(self, upserts: list[ConfigObject], deletes: list[ConfigObject]) -> None:
        pending = _Pending(upserts, deletes)
        self._pending.append(pending)
        async with self._commit_lock:
            if not pending.done:  # nobody wrote it while we waited: write all waiting
                batch, self._pending = self._pending, []
                await self._write(batch)
        if pending.error is not None:
            raise pending.error

    async def _write(self, batch: list[_Pending]) -> None:
        now, started = time.time(), time.monotonic()
        changes = [pending.stage(self._objects, now) for pending in batch]
        write = asyncio.ensure_future(self._store.commit_many(changes, self.serial + 1, self.fence))
        killed = False
        while not write.done():
            # A job killed meanwhile does not stop the write in the store's
            # thread: see it to its end, so that memory follows the disk.
            try:
                await asyncio.shield(write)
            except asyncio.CancelledError:
                killed = True
            except Exception:
                pass  # the store's error: below
        error = _error_of(write)
        if error is None:
            self.commit_timer(time.monotonic() - started)
            for pending, refusal in zip(batch, write.result(), strict=True):
                if refusal is None:
                    self.mtime = max(self.mtime, now)
                    self._show(pending.upserts, pending.deletes)
                pending.end(refusal)
        else:
            for pending in batch:  # nothing was written
                pending.end(error)
        if killed:
            raise asyncio.CancelledError
        if error is not None:
            raise error

    def _show(self, upserts: list[ConfigObject], deletes: list[ConfigObject]) -> None:
        """Make a committed change visible to readers and listeners."""
        self.serial += 1
        self._changes.append((self.serial, upserts, deletes))
        for obj in deletes:
            old = self._objects[obj.TABLE].pop(obj.uuid, None)
            if old is not None:
                self._by_name[obj.TABLE].pop(old.name, None)
                self._renamed(obj.TABLE, old.name, None)
                if isinstance(old, Instance):
                    self._index_nics(old, add=False)
        for obj in upserts:
            old = self._objects[obj.TABLE].get(obj.uuid)
            if old is None or old.name != obj.name:
                self._renamed(obj.TABLE, old.name if old else None, obj.name)
            if old is not None and old.name != obj.name:
                self._by_name[obj.TABLE].pop(old.name, None)
            if isinstance(old, Instance):
                self._index_nics(old, add=False)
            self._objects[obj.TABLE][obj.uuid] = obj
            self._by_name[obj.TABLE][obj.name] = obj
            if isinstance(obj, Instance):
                self._index_nics(obj, add=True)
        tables = {obj.TABLE for obj in (*upserts, *deletes)}
        for callback in self._listeners:
            callback(self, tables)


class ConfigTransaction:
    """The changes of one logical unit, committed together or not at all."""

    def __init__(self, manager: ConfigManager) -> None:
        self._manager = manager
        self._upserts: dict[str, ConfigObject] = {}
        self._deletes: dict[str, ConfigObject] = {}
        self._ended: list[Callable[[bool], None]] = []
        self.committed = False

    @property
    def changed(self) -> bool:
        return bool(self._upserts or self._deletes)

    def update(self, obj: ConfigObject) -> None:
        """Stage a changed copy of an existing object."""
        if self._manager.get(type(obj), obj.uuid) is None:
            raise errors.ConfigurationError(f"Cannot update unknown {obj.TABLE} '{obj.name}'")
        self._check_name(obj)
        # The last staged action wins; a staged removal would otherwise be
        # applied on disk (deletes follow upserts) but not in memory.
        self._deletes.pop(obj.uuid, None)
        self._upserts[obj.uuid] = obj

    def add(self, obj: ConfigObject) -> None:
        """Stage a new object; its name must be unique in its table."""
        if self._manager.get(type(obj), obj.uuid) is not None:
            raise errors.ConfigurationError(f"Duplicate uuid {obj.uuid}")
        self._check_name(obj)
        self._upserts[obj.uuid] = obj

    def remove(self, obj: ConfigObject) -> None:
        self._upserts.pop(obj.uuid, None)
        self._deletes[obj.uuid] = obj

    def _check_name(self, obj: ConfigObject) -> None:
        holder = self._manager.find(type(obj), obj.name)
        staged = [o for o in self._upserts.values() if o.TABLE == obj.TABLE]
        if (
            holder is not None and holder.uuid != obj.uuid and holder.uuid not in self._deletes
        ) or any(o.name == obj.name and o.uuid != obj.uuid for o in staged):
            raise errors.OpPrereqError(f"The name '{obj.name}' is already in use", C.ECODE_EXISTS)

    def when_ended(self, callback: Callable[[bool], None]) -> None:
        """Call ``callback(True)`` once the transaction has committed, or
        ``callback(False)`` if its commit fails or it is abandoned."""
        self._ended.append(callback)

    async def commit(self) -> bool:
        """Write the staged changes; returns whether there were any."""
        if self.committed:
            raise errors.ProgrammerError("Transaction committed twice")
        self.committed = True
        try:
            if self.changed:
                await self._manager._apply(
                    list(self._upserts.values()), list(self._deletes.values())
                )
        except BaseException:
            self._end(False)
            raise
        self._end(True)
        return self.changed

    def abandon(self) -> None:
        """The unit ends without committing (it failed): tell who waits."""
        if not self.committed:
            self.committed = True
            self._end(False)

    def _end(self, committed: bool) -> None:
        callbacks, self._ended = self._ended, []
        for callback in callbacks:
            callback(committed)


def initial_change(objects: list[ConfigObject]) -> ConfigChange:
    """The first content of a new configuration."""
    change = ConfigChange()
    for obj in objects:
        change.upserts.setdefault(obj.TABLE, []).append(obj.model_dump())
    return change
