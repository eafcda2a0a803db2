"""Crash consistency: a durable record of every operation under way that
creates things on nodes or stops an instance.

Before such an operation touches a node it writes, durably, what it is about
to do: one record format, under ``intents/`` in masterd's durable state, with a
``kind`` per operation (the table KINDS).  Once the operation is over its
record is dropped.  A record left by an interrupted operation (masterd
killed) is *settled* when masterd starts again, under the instance's lock:
what the operation left is finished or undone, so that the instance runs
again if it ran and no copy is left behind.  One that cannot be settled yet
(a node does not answer) is retried in the background, by the next operation
on the instance, and reported by ``gnt-cluster verify`` (:func:`findings`).

Kinds:

- ``add`` (instance add or import): the disks and the hypervisor state made
  on the primary node go unless the instance is in the configuration.
  Records of older Corral have no kind: they are adds, named by the
  instance's uuid, whose disks may be bare file paths.
- ``move`` (``gnt-instance move``): if the configuration names the target
  node, the move is finished (the source's disks go, the instance starts on
  the target if it is marked up); otherwise it is undone (the target's copies
  go, the instance starts again on the source if it ran).
- ``export`` (``gnt-backup export``): the unfinished ``<instance>.new`` on the
  target node goes, a move key on the source goes, and the instance starts
  again if the export had shut it down.
- ``failover``: before the target was asked to start the instance (phase
  ``stopping``), undone: the instance starts again on the source if it
  stopped there; after (phase ``starting``), finished: the configuration
  names the target, which runs the instance.
- ``migrate`` (of disks only the source has, which the target gets copies
  of): once the instance runs only on the node the configuration names (or
  nowhere), the other node's disks go.  While both hold it, or it runs where
  the configuration does not say, the operator repairs that first, as in
  Ganeti (``gnt-instance migrate --cleanup``); the record waits till then.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, cast

from corral import constants as C
from corral import errors
from corral.cmdlib import instance_utils as U
from corral.disk_description import DiskDescription
from corral.objects import ADMIN_UP, Instance, Node
from corral.rpc.calls_impexp import export_discard, x509_cert_remove
from corral.rpc.calls_instance import all_instances_info, instance_shutdown, instance_start
from corral.rpc.calls_storage import blockdev_remove
from corral.rpc.calls_transfer import transfer_finish
from corral.rpc.wire import DiskWire
from corral.storage import templates
from corral.storage_names import DT_FILE, FILE_DRIVERS

if TYPE_CHECKING:
    from corral.cmdlib.base import LogicalUnit
    from corral.cmdlib.instance_base import InstanceLU
    from corral.config.manager import ConfigManager
    from corral.services.context import Master
    from corral.services.durable import DurableState

log = logging.getLogger(__name__)

PREFIX = "intents/"
# Seconds between background attempts while records are left: doubling up to the cap.
RETRY_FIRST = 1.0
RETRY_MAX = 15.0

ADD, MOVE, EXPORT, FAILOVER, MIGRATE = "add", "move", "export", "failover", "migrate"
# Failover phases: the target was not yet asked to start the instance, or was.
STOPPING, STARTING = "stopping", "starting"


@dataclass(frozen=True)
class Say:
    """Where a settlement tells what it does: a unit's job log, or masterd's log."""

    info: Callable[[str], None]
    warn: Callable[[str], None]

    @classmethod
    def of(cls, lu: LogicalUnit[Any]) -> Say:
        return cls(lu.log_info, lu.warn)


BACKGROUND = Say(log.info, log.warning)


@dataclass(frozen=True)
class Intent:
    """What one operation on an instance does to nodes (see the kinds above)."""

    uuid: str  # the instance's
    name: str  # the instance's name when the operation began
    node: str  # uuid of the node it creates things on (add: primary; move, export: target)
    hypervisor: str
    disks: tuple[DiskWire, ...] = ()  # the disks' descriptions (DiskDescription.to_wire)
    kind: str = ADD
    source: str = ""  # uuid of the node the instance ran on (move, export, failover)
    restart: bool = False  # it ran there before the operation shut it down
    transfer: str = ""  # move: the target's transfer id
    export: str = ""  # local export: the instance name of <name>.new on ``node``
    key: str = ""  # remote export: the move key's name on ``source``
    phase: str = ""  # failover: STOPPING or STARTING

    @classmethod
    def of(cls, inst: Instance) -> Intent:
        """An add of ``inst`` on its primary node."""
        disks = tuple(d.description().to_wire() for d in inst.disks)
        return cls(inst.uuid, inst.name, inst.primary_node, inst.hypervisor, disks)

    @classmethod
    def for_instance(cls, kind: str, inst: Instance, node: str, **fields: Any) -> Intent:
        """A ``kind`` operation on ``inst`` (which runs on its primary node now)."""
        disks = tuple(d.description().to_wire() for d in inst.disks)
        return cls(
            inst.uuid,
            inst.name,
            node,
            inst.hypervisor,
            disks,
            kind=kind,
            source=inst.primary_node,
            **fields,
        )


def _disk(entry: Any) -> DiskWire:
    """A recorded disk (as written: the node checks it); a record of an older
    Corral names a file disk by its path."""
    if isinstance(entry, str):
        return DiskDescription(DT_FILE, (FILE_DRIVERS[0], entry), 0, "").to_wire()
    return cast("DiskWire", dict(entry))


# Records written by this masterd whose operation is under way (not settled
# by the background, not reported by verify), and why a settlement failed last.
_ACTIVE: set[str] = set()
_WHY: dict[str, str] = {}


async def write(master: Master, intent: Intent, key: str | None = None) -> str:
    """Record ``intent`` durably, under ``key`` if given (a record rewritten
    as its operation goes on); its key."""
    if key is None:
        stem = intent.uuid if intent.kind == ADD else f"{intent.uuid}.{intent.kind}"
        suffix = "" if intent.kind == ADD else f".{secrets.token_hex(4)}"
        key = f"{PREFIX}{stem}{suffix}"
    await master.durable.put(key, asdict(intent))
    _ACTIVE.add(key)
    return key


def drop(master: Master, key: str) -> None:
    """Forget a record: its operation ended and left nothing to settle."""
    master.durable.forget(key)
    _ACTIVE.discard(key)
    _WHY.pop(key, None)


def from_record(data: dict[str, Any]) -> Intent:
    """The intent a record holds (one of an older Corral too)."""
    known = {f.name for f in dataclasses.fields(Intent)}
    data = {k: v for k, v in data.items() if k in known}  # a newer Corral's extras
    return Intent(**{**data, "disks": tuple(_disk(entry) for entry in data["disks"])})


def pending(state: DurableState) -> list[tuple[str, Intent]]:
    """The records left (unreadable ones are logged and kept)."""
    out = []
    for key, data in state.scan(PREFIX).items():
        try:
            out.append((key, from_record(data)))
        except (ValueError, TypeError, KeyError) as err:
            log.error("Cannot read the operation record %s: %s", key, err)
    return out


# Settling, by kind
def _node(cfg: ConfigManager, uuid: str) -> Node | None:
    """The node, unless it left the cluster or is marked offline (nothing can
    be done there: what it holds is the operator's, as Ganeti's offline nodes)."""
    node = cfg.get(Node, uuid) if uuid else None
    return None if node is None or node.offline else node


async def _remove_disks(
    master: Master, node: Node | None, disks: tuple[DiskWire, ...], name: str, say: Say
) -> bool:
    """Remove ``disks`` (present or not) from ``node``; whether all went."""
    if node is None:
        return True
    done = True
    for disk in disks:
        label = (disk.get("logical_id") or [disk.get("uuid")])[-1]
        what = f"Could not remove disk {label} of {name} on {node.name}"
        res = await master.rpc.attempt(node, blockdev_remove(disk), say.warn, what)
        done = done and not res.failed
    return done


async def _running(master: Master, node: Node, inst: Instance) -> bool | None:
    """Whether ``inst`` runs on ``node`` (None: the node cannot tell)."""
    res = await master.rpc.result(node, all_instances_info([inst.hypervisor]))
    if res.value is None:
        return None
    info = res.value.get(inst.name)
    return info is not None and info.get("state") != C.HV_STATE_SHUTDOWN


async def _start(master: Master, inst: Instance, node: Node | None, say: Say, line: str) -> bool:
    """Start ``inst`` on ``node`` unless it runs there; False while the node
    cannot be reached (a start the node refused is warned, not retried)."""
    if node is None:
        return True
    running = await _running(master, node, inst)
    if running is None:
        say.warn(f"Could not start instance {inst.name} on node {node.name}: it does not answer")
        return False
    if running:
        return True
    say.info(line)
    desc = U.start_descriptor(master.cfg, inst)
    what = f"Could not start instance {inst.name} on node {node.name}"
    res = await master.rpc.attempt(node, instance_start(desc, False), say.warn, what)
    return not res.offline


async def _settle_add(master: Master, it: Intent, say: Say) -> bool:
    """Remove what an add created, unless the add committed."""
    cfg = master.cfg
    if cfg.get(Instance, it.uuid) is not None:
        return True
    node = cfg.get(Node, it.node)
    if node is None:
        return True  # the node left the cluster
    done = await _remove_disks(master, node, it.disks, it.name, say)
    # A mirrored disk's other copies (on the secondary nodes).
    for other in _other_holders(it):
        mirrors = tuple(d for d in it.disks if other in d.get("nodes", []))
        done = await _remove_disks(master, cfg.get(Node, other), mirrors, it.name, say) and done
    # The hypervisor's state is by name: leave it to an instance now owning the name.
    if cfg.find(Instance, it.name) is None:
        what = f"Could not remove hypervisor state of {it.name} on {node.name}"
        res = await master.rpc.attempt(
            node, instance_shutdown(it.hypervisor, it.name, 0), say.warn, what
        )
        done = done and not res.failed
    return done


def _other_holders(it: Intent) -> list[str]:
    """The nodes other than ``it.node`` holding a copy of the recorded disks."""
    nodes = (node for disk in it.disks for node in disk.get("nodes", []))
    return [node for node in dict.fromkeys(nodes) if node != it.node]


async def _drop_copies(master: Master, it: Intent, say: Say) -> bool:
    """Remove the disks a move made on its target, kept or not."""
    target = _node(master.cfg, it.node)
    if target is None:
        return True
    what = f"Could not remove the partial disks on node {target.name}"
    res = await master.rpc.attempt(target, transfer_finish(it.transfer, False), say.warn, what)
    if res.failed:
        return False
    # A transfer the target kept already (the copy was complete) is no longer its own.
    if not await _remove_disks(master, target, it.disks, it.name, say):
        return False
    if res.payload["received"]:
        say.info(f"Removed the partial disks on node {target.name}")
    return True


async def _settle_move(master: Master, it: Intent, say: Say) -> bool:
    """Finish a move the configuration records, undo one it does not."""
    cfg = master.cfg
    inst = cfg.get(Instance, it.uuid)
    source = _node(cfg, it.source)
    if inst is not None and inst.primary_node == it.node:
        target = _node(cfg, it.node)
        done = await _remove_disks(master, source, it.disks, it.name, say)
        if inst.admin_state == ADMIN_UP:
            line = f"Starting instance {inst.name} on node {target.name if target else it.node}"
            done = await _start(master, inst, target, say, line) and done
        return done
    done = await _drop_copies(master, it, say)
    if inst is None:
        # Removed since: whichever node was its primary lost its disks then.
        return await _remove_disks(master, source, it.disks, it.name, say) and done
    if it.restart and inst.admin_state == ADMIN_UP and inst.primary_node == it.source:
        line = f"Starting instance {inst.name} again on source node {source.name if source else ''}"
        done = await _start(master, inst, source, say, line) and done
    return done


async def _settle_export(master: Master, it: Intent, say: Say) -> bool:
    """Remove an unfinished export and a move key; start the instance again."""
    cfg = master.cfg
    done = True
    target = _node(cfg, it.node) if it.export else None
    if target is not None:
        what = f"Could not remove the partial export {it.export}.new on node {target.name}"
        res = await master.rpc.attempt(target, export_discard(it.export), say.warn, what)
        done = not res.failed
    source = _node(cfg, it.source)
    if it.key and source is not None:
        # Best effort: an unused key expires on its own (and goes at noded's start).
        what = f"Could not remove X509 key {it.key} on node {source.name}"
        await master.rpc.attempt(source, x509_cert_remove(it.key), say.warn, what)
    inst = cfg.get(Instance, it.uuid)
    if (
        it.restart
        and inst is not None
        and inst.admin_state == ADMIN_UP
        and inst.primary_node == it.source
    ):
        done = await _start(master, inst, source, say, f"Starting instance {inst.name}") and done
    return done


async def _settle_failover(master: Master, it: Intent, say: Say) -> bool:
    """Before the target was asked to start it: the instance runs again on the
    source.  After: the configuration names the target, which runs it."""
    cfg = master.cfg
    inst = cfg.get(Instance, it.uuid)
    if inst is None or inst.admin_state != ADMIN_UP:
        return True
    if it.phase == STARTING and inst.primary_node == it.source:
        tx = cfg.transaction()
        moved = inst.copy_for_update()
        assert isinstance(moved, Instance)
        templates.set_primary(moved, it.node)
        tx.update(moved)
        await tx.commit()
        inst = moved
        say.info(f"Instance {inst.name} now belongs to node {_name(cfg, it.node)}")
    node = _node(cfg, inst.primary_node)
    if inst.primary_node == it.node:
        line = f"Starting instance {inst.name} on node {_name(cfg, it.node)}"
    elif inst.primary_node == it.source and it.restart:
        line = f"Starting instance {inst.name} again on source node {_name(cfg, it.source)}"
    else:
        return True
    return await _start(master, inst, node, say, line)


async def _settle_migrate(master: Master, it: Intent, say: Say) -> bool:
    """Remove the disks of the node that does not hold the instance, once
    that is clear."""
    cfg = master.cfg
    inst = cfg.get(Instance, it.uuid)
    source, target = _node(cfg, it.source), _node(cfg, it.node)
    if inst is None:
        # Removed since: whichever node was its primary lost its disks then.
        done = await _remove_disks(master, source, it.disks, it.name, say)
        return await _remove_disks(master, target, it.disks, it.name, say) and done
    found = {}
    for node in (source, target):
        if node is not None:
            found[node.uuid] = await _running(master, node, inst)
    if None in found.values():
        return False  # a node cannot tell: next time
    where = {uuid for uuid, running in found.items() if running}
    if not where <= {inst.primary_node}:
        say.warn(
            f"Instance {inst.name} runs on {', '.join(_name(cfg, u) for u in sorted(where))}"
            f" but belongs to {_name(cfg, inst.primary_node)}: run 'gnt-instance migrate"
            f" --cleanup {inst.name}'"
        )
        return False
    done = True
    for node in (source, target):
        if node is not None and node.uuid != inst.primary_node:
            done = await _remove_disks(master, node, it.disks, it.name, say) and done
    return done


def _name(cfg: ConfigManager, uuid: str) -> str:
    node = cfg.get(Node, uuid)
    return node.name if node is not None else uuid


Settler = Callable[["Master", Intent, Say], Awaitable[bool]]
KINDS: dict[str, Settler] = {
    ADD: _settle_add,
    MOVE: _settle_move,
    EXPORT: _settle_export,
    FAILOVER: _settle_failover,
    MIGRATE: _settle_migrate,
}


async def settle(master: Master, key: str, intent: Intent, say: Say) -> bool:
    """Finish or undo what the record names (the instance's lock held); drop
    the record once nothing is left.  Whether nothing is left."""
    settler = KINDS.get(intent.kind)
    if settler is None:
        say.warn(f"Unknown operation {intent.kind!r} in record {key}: kept for a newer Corral")
        return False
    if not await settler(master, intent, say):
        return False
    drop(master, key)
    return True


async def conclude(master: Master, key: str, intent: Intent, say: Say) -> None:
    """Settle the record of an operation that failed; what cannot be settled
    now is left to the background (and shown by verify)."""
    _ACTIVE.discard(key)
    if not await settle(master, key, intent, say):
        release(master, key)


async def settle_name(master: Master, name: str, say: Say) -> None:
    """Settle the records of earlier adds of ``name`` (its lock held)."""
    for key, intent in pending(master.durable):
        if intent.kind == ADD and intent.name == name and key not in _ACTIVE:
            await settle(master, key, intent, say)


async def settle_before(lu: InstanceLU) -> None:
    """Settle what interrupted operations on ``lu``'s instance left, before
    the unit acts on it (its locks held)."""
    inst = lu.instance
    for key, intent in pending(lu.master.durable):
        if intent.uuid == inst.uuid and intent.kind != ADD and key not in _ACTIVE:
            await settle(lu.master, key, intent, Say.of(lu))
    current = lu.cfg.get(Instance, inst.uuid)
    if current is None or current.primary_node != inst.primary_node:
        # A failover finished: the unit's node locks are not the instance's any more.
        raise errors.OpExecError(
            f"Instance {inst.name} changed while an interrupted operation on it was"
            " settled; submit the job again"
        )
    lu.instance = current


def release(master: Master, key: str) -> None:
    """The operation of the record ended, leaving something: the background
    settles it (and verify shows it meanwhile)."""
    _ACTIVE.discard(key)
    resolve_in_background(master)


def drop_after_commit(lu: LogicalUnit[Any], key: str, committed: Callable[[], bool]) -> None:
    """Drop the record of a successful operation once the unit's transaction
    has committed, if ``committed()`` says the configuration has it (should
    the commit fail, or not happen, the background settles the record)."""
    master = lu.master

    def finish(ended: bool) -> None:
        if ended and committed():
            drop(master, key)
        else:
            release(master, key)

    lu.tx.when_ended(finish)


# Background resolution, one task per masterd.
_tasks: dict[int, asyncio.Task[None]] = {}


def resolve_in_background(master: Master) -> None:
    """Make sure every record left gets settled (started by masterd, and after
    an operation that could not clean up)."""
    task = _tasks.get(id(master))
    if task is not None and not task.done():
        return
    _tasks[id(master)] = asyncio.get_running_loop().create_task(_resolve_loop(master))


async def stop_background(master: Master) -> None:
    """Cancel the background resolution (masterd stopping: records left are
    resolved at the next start)."""
    task = _tasks.pop(id(master), None)
    if task is not None and not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _resolve_loop(master: Master) -> None:
    delay = RETRY_FIRST
    while True:
        left = [
            await _resolve_one(master, key, intent)
            for key, intent in pending(master.durable)
            if key not in _ACTIVE
        ]
        if not any(left):
            return
        await asyncio.sleep(delay)
        delay = min(delay * 2, RETRY_MAX)


async def _resolve_one(master: Master, key: str, intent: Intent) -> bool:
    """Settle one record under the instance's lock; True if it is left."""
    cfg = master.cfg
    inst = cfg.get(Instance, intent.uuid)
    if intent.kind == ADD and inst is not None:
        drop(master, key)  # committed: no lock needed
        return False
    # An add locks the name it was adding; other operations the instance's current name.
    name = inst.name if inst is not None and intent.kind != ADD else intent.name
    owner = f"intent-settle:{key}"
    locks = master.locks

    def note(message: str) -> None:
        log.warning("%s", message)
        _WHY[key] = message

    try:
        await locks.acquire(owner, C.LEVEL_CLUSTER, [C.BGL], shared=True)
        await locks.acquire(owner, C.LEVEL_INSTANCE, [name], shared=False)
        if master.durable.get(key) is None or key in _ACTIVE:
            return False  # settled meanwhile (by the next operation on the instance)
        current = cfg.get(Instance, intent.uuid)
        if intent.kind != ADD and current is not None and current.name != name:
            return True  # renamed while we waited: the next round locks the new name
        return not await settle(master, key, intent, Say(log.info, note))
    except Exception:
        log.exception("Cannot settle the interrupted %s of %s", intent.kind, intent.name)
        return True
    finally:
        locks.release(owner)


# What gnt-cluster verify reports
@dataclass(frozen=True)
class Finding:
    """One thing an interrupted operation left, as verify reports it."""

    node: str  # uuid of the node it concerns
    ecode: str
    itype: str
    item: str
    text: str
    warning: bool


def _left(cfg: ConfigManager, it: Intent) -> list[tuple[str, str]]:
    """(node uuid, what is left there) of a record not settled yet."""
    inst = cfg.get(Instance, it.uuid)
    what = f"an interrupted {it.kind} of instance {it.name}"
    if it.kind == ADD:
        return [(it.node, f"disks and hypervisor state left by {what} are not removed yet")]
    if it.kind == MOVE:
        committed = inst is not None and inst.primary_node == it.node
        return [(it.source if committed else it.node, f"disks left by {what} are not removed yet")]
    if it.kind == MIGRATE:
        owner = inst.primary_node if inst is not None else ""
        return [(node, f"disks left by {what} are not removed yet")
                for node in (it.source, it.node) if node != owner]  # fmt: skip
    if it.kind == EXPORT and it.export:
        return [(it.node, f"unfinished export {it.export}.new left by {what} is not removed yet")]
    return []


def findings(cfg: ConfigManager, state: DurableState) -> list[Finding]:
    """What the records of interrupted operations, not settled yet, left on
    nodes (operations under way are not reported).  An instance not started
    again shows as not running on its node (or its node as unreachable)."""
    out = []
    for key, it in pending(state):
        if key in _ACTIVE:
            continue
        why = f" ({_WHY[key]})" if key in _WHY else ""
        for node, text in _left(cfg, it):
            item = _name(cfg, node)
            out.append(Finding(node, "ENODEORPHANLV", "node", item, text + why, True))
    return out


def unfinished_exports(state: DurableState) -> set[tuple[str, str]]:
    """(node uuid, instance name) of every ``<name>.new`` an export record
    covers: verify reports those through :func:`findings`, or not at all."""
    return {(it.node, it.export) for _, it in pending(state) if it.kind == EXPORT and it.export}
