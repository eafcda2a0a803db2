"""The target's side of a disk copy between two nodes (``gnt-instance move``).

``transfer_prepare`` creates the disks and registers a one-time transfer id;
the bytes then arrive through an import of the import/export engine
(:mod:`corral.node.impexp`), which writes into these very disks (same
descriptions, same paths); the master renews the transfer while it copies
(``transfer_touch``).

What a transfer created is recorded on disk (``<data dir>/transfers/<id>.json``)
until ``transfer_finish`` keeps or removes it, so that partial disks never
outlive a failure: a transfer unused for its ``ttl`` expires (its disks
removed), and records left by a noded that died are resolved when noded
starts again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from corral import errors
from corral.disk_description import DiskDescription
from corral.fileio import atomic_write
from corral.node.context import NodeContext
from corral.node.storage import file as file_storage
from corral.node.storage import registry
from corral.paths import Paths

log = logging.getLogger(__name__)

RECORD_DIR = "transfers"
# Transfer ids are made by the master (secrets.token_hex); they name record files.
_ID = re.compile(r"[0-9a-zA-Z_-]{16,64}")
# The longest a transfer may wait between two uses, whatever the master asks.
MAX_TTL = 24 * 3600.0


def check_id(transfer_id: object) -> str:
    """``transfer_id`` if it is a well-formed transfer id; OpExecError if not."""
    if not isinstance(transfer_id, str) or not _ID.fullmatch(transfer_id):
        raise errors.OpExecError(f"Invalid transfer id {transfer_id!r}")
    return transfer_id


def record_path(paths: Paths, transfer_id: str) -> Path:
    return paths.data_dir / RECORD_DIR / f"{transfer_id}.json"


@dataclass
class Incoming:
    """One transfer this node receives: its disks and when it was last used."""

    transfer_id: str
    disks: list[DiskDescription]
    ttl: float
    last_used: float = field(default_factory=time.monotonic)
    expiry: asyncio.Task[None] | None = None

    def touch(self) -> None:
        self.last_used = time.monotonic()


# transfer id → what this noded receives (one noded process per node).
_INCOMING: dict[str, Incoming] = {}


def _write_record(paths: Paths, transfer_id: str, created: list[DiskDescription]) -> None:
    data = json.dumps({"disks": [d.to_wire() for d in created]}).encode()
    atomic_write(record_path(paths, transfer_id), data, mode=0o600)


def _remove_disks(paths: Paths, disks: list[DiskDescription]) -> list[str]:
    """Remove ``disks``; the errors, one line each."""
    problems = []
    for disk in disks:
        try:
            registry.template_of(paths, disk).remove(disk)
        except (errors.GenericError, OSError) as err:
            problems.append(f"{disk.iv_name or disk.uuid}: {err}")
    return problems


def _create_all(paths: Paths, transfer_id: str, disks: list[DiskDescription]) -> None:
    """Create the disks, recording each before it exists; all or none."""
    created: list[DiskDescription] = []
    try:
        for disk in disks:
            _write_record(paths, transfer_id, [*created, disk])
            registry.template_of(paths, disk).create(disk)
            created.append(disk)
    except BaseException:
        _remove_disks(paths, created)
        record_path(paths, transfer_id).unlink(missing_ok=True)
        raise


async def prepare(ctx: NodeContext, transfer_id: Any, disks: Any, ttl: Any) -> None:
    """Create ``disks`` (descriptions) and accept one transfer of them under ``transfer_id``."""
    tid = check_id(transfer_id)
    if tid in _INCOMING or record_path(ctx.paths, tid).exists():
        raise errors.OpExecError(f"Transfer {tid} already exists")
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl <= MAX_TTL:
        raise errors.OpExecError(f"Invalid transfer time-to-live {ttl!r}")
    if not isinstance(disks, list) or not disks:
        raise errors.OpExecError(f"Invalid disk list {disks!r}")
    descs = [registry.resolve(ctx.paths, d)[1] for d in disks]
    await asyncio.to_thread(_create_all, ctx.paths, tid, descs)
    incoming = Incoming(tid, descs, float(ttl))
    incoming.expiry = asyncio.create_task(_expire(ctx.paths, incoming))
    _INCOMING[tid] = incoming


async def _expire(paths: Paths, incoming: Incoming) -> None:
    """Drop the transfer and its disks once it has been unused for its ttl."""
    while True:
        idle = time.monotonic() - incoming.last_used
        if idle >= incoming.ttl:
            break
        await asyncio.sleep(max(incoming.ttl - idle, 0.05))
    log.warning(
        "Transfer %s unused for %g s: removing its disks", incoming.transfer_id, incoming.ttl
    )
    incoming.expiry = None
    await _drop(paths, incoming, keep=False)


async def _drop(paths: Paths, incoming: Incoming, *, keep: bool) -> None:
    _INCOMING.pop(incoming.transfer_id, None)
    if incoming.expiry is not None:
        incoming.expiry.cancel()
    problems = [] if keep else await asyncio.to_thread(_remove_disks, paths, incoming.disks)
    if problems:
        raise errors.OpExecError(f"Could not remove disks: {'; '.join(problems)}")
    record_path(paths, incoming.transfer_id).unlink(missing_ok=True)


async def finish(paths: Paths, transfer_id: str, success: bool) -> bool:
    """End the transfer ``transfer_id`` received here: keep its disks (once each
    is verified) or remove them.  Whether this node received it."""
    incoming = _INCOMING.get(transfer_id)
    if incoming is None:
        if not success and record_path(paths, transfer_id).exists():
            await asyncio.to_thread(resolve_record, record_path(paths, transfer_id), paths)
            return True
        return False
    if success:
        for disk in incoming.disks:
            problem = await asyncio.to_thread(registry.template_of(paths, disk).verify, disk)
            if problem:
                raise errors.OpExecError(f"Received {problem}")
    await _drop(paths, incoming, keep=success)
    return True


def resolve_record(path: Path, paths: Paths) -> None:
    """Remove the disks a dead transfer's record names, then the record."""
    try:
        wire = json.loads(path.read_text())["disks"]
        disks = [DiskDescription.from_wire(d) for d in wire]
    except (OSError, ValueError, KeyError, TypeError, errors.GenericError) as err:
        log.error("Unreadable transfer record %s (%s): removing it", path, err)
        path.unlink(missing_ok=True)
        return
    problems = _remove_disks(paths, disks)
    if problems:
        log.error("Transfer record %s: could not remove %s", path, "; ".join(problems))
        return
    log.warning("Removed the disks of the interrupted transfer %s", path.stem)
    path.unlink(missing_ok=True)


def resolve_leftovers(paths: Paths) -> None:
    """At noded's start: every record is a transfer a dead noded left; undo it."""
    directory = paths.data_dir / RECORD_DIR
    with contextlib.suppress(FileNotFoundError):
        for path in sorted(directory.glob("*.json")):
            resolve_record(path, paths)


def touch(transfer_id: str) -> bool:
    """Mark the transfer as used (the master copies into its disks); whether it is known."""
    incoming = _INCOMING.get(transfer_id)
    if incoming is not None:
        incoming.touch()
    return incoming is not None


def add_routes(app: web.Application, ctx: NodeContext) -> None:
    """When noded starts: resolve the transfers a dead noded left, and
    finish the removals of disk files it had begun."""

    async def _startup(_: web.Application) -> None:
        await asyncio.to_thread(resolve_leftovers, ctx.paths)
        await asyncio.to_thread(file_storage.remove_leftovers, ctx.paths)

    app.on_startup.append(_startup)
