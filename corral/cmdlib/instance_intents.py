"""Crash-consistent instance creation: an intent record per add under way.

Before an add creates anything on its node (disk files; the hypervisor's
state when it starts the instance) it writes, durably, what it is about to
create: ``<data dir>/instance-intents/<instance uuid>.json``.  The record is
resolved once the add is over: if the instance is in the configuration it is
dropped; if not, what it names is removed from the node first.  A record left
by an interrupted add (masterd killed) is resolved when masterd starts again;
one whose clean-up failed (the node was unreachable) is retried in the
background, and by the next add of the same name.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral.fileio import atomic_write
from corral.objects import Instance, Node
from corral.storage.disk import DiskDescription
from corral.storage.names import DT_FILE, FILE_DRIVERS

if TYPE_CHECKING:
    from corral.master.context import Master
    from corral.paths import Paths

log = logging.getLogger(__name__)

INTENT_DIR = "instance-intents"
# Seconds between background attempts while records are left: doubling up to the cap.
RETRY_FIRST = 1.0
RETRY_MAX = 15.0

Warn = Callable[[str], None]


@dataclass(frozen=True)
class Intent:
    """What one add creates on its primary node."""

    uuid: str
    name: str
    node: str  # uuid of the primary node
    hypervisor: str
    disks: tuple[dict[str, Any], ...]  # the disks' descriptions (DiskDescription.to_wire)

    @classmethod
    def of(cls, inst: Instance) -> Intent:
        disks = tuple(d.description().to_wire() for d in inst.disks)
        return cls(inst.uuid, inst.name, inst.primary_node, inst.hypervisor, disks)


def _disk(entry: Any) -> dict[str, Any]:
    """A recorded disk; a record of an older Corral names a file disk by its path."""
    if isinstance(entry, str):
        return DiskDescription(DT_FILE, (FILE_DRIVERS[0], entry), 0, "").to_wire()
    return dict(entry)


def intent_dir(paths: Paths) -> Path:
    return paths.data_dir / INTENT_DIR


def write(paths: Paths, intent: Intent) -> Path:
    """Record ``intent`` durably (file and directory entry synced); its path."""
    path = intent_dir(paths) / f"{intent.uuid}.json"
    atomic_write(path, json.dumps(asdict(intent)).encode(), mode=0o600)
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def pending(paths: Paths) -> list[tuple[Path, Intent]]:
    """The records left (unreadable ones are logged and kept)."""
    out = []
    for path in sorted(intent_dir(paths).glob("*.json")):
        try:
            data = json.loads(path.read_text())
            disks = tuple(_disk(entry) for entry in data["disks"])
            out.append((path, Intent(**{**data, "disks": disks})))
        except (OSError, ValueError, TypeError, KeyError) as err:
            log.error("Cannot read the instance-add record %s: %s", path, err)
    return out


async def undo(master: Master, intent: Intent, warn: Warn) -> bool:
    """Remove from the node what ``intent`` names, unless the add committed.

    The caller holds the lock of the instance's name.  True when nothing is
    left (the record can go); False when the node could not do it.
    """
    cfg = master.cfg
    if cfg.get(Instance, intent.uuid) is not None:
        return True
    node = cfg.get(Node, intent.node)
    if node is None:
        return True  # the node left the cluster
    calls: list[tuple[str, list[object], str]] = [
        ("blockdev_remove", [disk], f"disk {(disk['logical_id'] or [disk['uuid']])[-1]}")
        for disk in intent.disks
    ]
    # The hypervisor's state is by name: leave it to an instance now owning the name.
    if cfg.find(Instance, intent.name) is None:
        calls.append(("instance_shutdown", [intent.hypervisor, intent.name, 0], "hypervisor state"))
    done = True
    for call, args, what in calls:
        res = await master.rpc.call_one(node.uuid, node.primary_ip, call, args)
        if res.fail_msg:
            warn(f"Could not remove {what} of {intent.name} on {node.name}: {res.fail_msg}")
            done = False
    return done


async def settle(master: Master, path: Path, intent: Intent, warn: Warn) -> bool:
    """:func:`undo`, then drop the record if nothing is left (name lock held)."""
    if not await undo(master, intent, warn):
        return False
    path.unlink(missing_ok=True)
    return True


async def settle_name(master: Master, name: str, warn: Warn) -> None:
    """Settle the records of earlier adds of ``name`` (its lock held)."""
    for path, intent in pending(master.paths):
        if intent.name == name:
            await settle(master, path, intent, warn)


def drop_after_commit(master: Master, path: Path, uuid: str) -> None:
    """Drop the record of a successful add once its unit yields, which is after
    its commit (should the commit fail, the background settles the record)."""

    def drop() -> None:
        if master.cfg.get(Instance, uuid) is not None:
            path.unlink(missing_ok=True)
        else:
            resolve_in_background(master)

    asyncio.get_running_loop().call_soon(drop)


# Background resolution, one task per masterd.
_tasks: dict[str, asyncio.Task[None]] = {}


def resolve_in_background(master: Master) -> None:
    """Make sure every record left gets settled (started by masterd, and after
    an add that could not clean up)."""
    key = str(intent_dir(master.paths))
    task = _tasks.get(key)
    if task is not None and not task.done():
        return
    _tasks[key] = asyncio.get_running_loop().create_task(_resolve_loop(master))


async def stop_background(master: Master) -> None:
    """Cancel the background resolution (masterd stopping: records left are
    resolved at the next start)."""
    task = _tasks.pop(str(intent_dir(master.paths)), None)
    if task is not None and not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _resolve_loop(master: Master) -> None:
    delay = RETRY_FIRST
    while True:
        left = [await _resolve_one(master, path, intent) for path, intent in pending(master.paths)]
        if not any(left):
            return
        await asyncio.sleep(delay)
        delay = min(delay * 2, RETRY_MAX)


async def _resolve_one(master: Master, path: Path, intent: Intent) -> bool:
    """Settle one record under the locks of an add of its name; True if it is left."""
    if master.cfg.get(Instance, intent.uuid) is not None:
        path.unlink(missing_ok=True)  # committed: no lock needed
        return False
    owner = f"instance-add-cleanup:{intent.uuid}"
    locks = master.locks
    try:
        await locks.acquire(owner, C.LEVEL_CLUSTER, [C.BGL], shared=True)
        await locks.acquire(owner, C.LEVEL_INSTANCE, [intent.name], shared=False)
        if not path.exists():
            return False  # settled meanwhile (by its add, or the next one)
        return not await settle(master, path, intent, log.warning)
    except Exception:
        log.exception("Cannot clean up after the add of %s", intent.name)
        return True
    finally:
        locks.release(owner)
