"""The receiving side of a disk copy between two nodeds.

``transfer_prepare`` creates the disks and registers a one-time transfer id;
the source noded then PUTs each disk's bytes to ``/transfer/<id>/<index>``
on this noded's TLS server (mutual TLS under the cluster CA, as every RPC),
and the bytes go straight into the disk (with direct I/O, see
:mod:`corral.node.transfer_io`): no temporary copy.  The answer carries the bytes written and
their checksum, which the source compares with its own.

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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from corral import errors
from corral.fileio import atomic_write
from corral.node.context import NodeContext
from corral.node.storage import registry
from corral.node.transfer_io import write_disk
from corral.node.transfer_stream import new_digest
from corral.paths import Paths
from corral.storage.disk import DiskDescription

log = logging.getLogger(__name__)

RECEIVE_PATH = "/transfer/{transfer_id}/{index}"
DISCARD_PATH = "/transfer-discard"
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
    # disk index → the request receiving it (cancelled if the transfer expires)
    receiving: dict[int, asyncio.Task[Any]] = field(default_factory=dict)
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
    for task in incoming.receiving.values():
        task.cancel()
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
        if incoming.receiving:
            raise errors.OpExecError(f"Transfer {transfer_id} is still receiving data")
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


def _reply(success: bool, payload: Any, status: int = 200) -> web.Response:
    return web.json_response([success, payload], status=status)


def _reader(request: web.Request, incoming: Incoming) -> Callable[[], Awaitable[bytes]]:
    """The next piece of the request's body, the transfer marked as used."""

    async def read_some() -> bytes:
        piece = await request.content.readany()
        incoming.touch()
        return piece

    return read_some


def _target(request: web.Request) -> tuple[Incoming, int, DiskDescription]:
    tid = request.match_info["transfer_id"]
    incoming = _INCOMING.get(tid)
    if incoming is None:
        raise web.HTTPNotFound(text=json.dumps([False, f"No transfer {tid!r} on this node"]))
    try:
        index = int(request.match_info["index"])
        if index < 0:
            raise IndexError(index)
        disk = incoming.disks[index]
    except (ValueError, IndexError):
        raise web.HTTPBadRequest(text=json.dumps([False, "No such disk in the transfer"])) from None
    if index in incoming.receiving:
        raise web.HTTPConflict(text=json.dumps([False, f"Disk {index} is already being received"]))
    return incoming, index, disk


async def receive(ctx: NodeContext, request: web.Request) -> web.Response:
    """``PUT /transfer/<id>/<index>``: write the body into the disk; its size and digest."""
    incoming, index, disk = _target(request)
    length = request.content_length
    if length is None:
        return _reply(False, "A transfer needs a Content-Length", 411)
    task = asyncio.current_task()
    assert task is not None
    incoming.receiving[index] = task
    incoming.touch()
    digest = new_digest()
    try:
        template = registry.template_of(ctx.paths, disk)
        written = await write_disk(template, disk, _reader(request, incoming), length, digest)
    except errors.GenericError as err:
        log.warning("Receiving disk %d of transfer %s failed: %s", index, incoming.transfer_id, err)
        return _reply(False, f"{disk.iv_name or 'disk'}: {err}")
    finally:
        incoming.receiving.pop(index, None)
        incoming.touch()
    return _reply(True, {"bytes": written, "digest": digest.hexdigest()})


async def discard(request: web.Request) -> web.Response:
    """``PUT /transfer-discard``: read the body and drop it (the plain-TLS baseline)."""
    received = 0
    while piece := await request.content.readany():
        received += len(piece)
    return _reply(True, {"bytes": received})


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _guarded(ctx: NodeContext, handler: Handler) -> Handler:
    """``handler`` for clients of the current cluster only (as every RPC)."""

    async def guarded(request: web.Request) -> web.StreamResponse:
        membership = ctx.membership
        if membership is not None and not membership.authenticated(request):
            return _reply(False, "Not a client of this node's cluster", 403)
        return await handler(request)

    return guarded


def add_routes(app: web.Application, ctx: NodeContext) -> None:
    """Serve the transfer endpoints on noded's app; resolve dead transfers at start."""

    async def _receive(request: web.Request) -> web.StreamResponse:
        return await receive(ctx, request)

    async def _startup(_: web.Application) -> None:
        await asyncio.to_thread(resolve_leftovers, ctx.paths)

    app.router.add_put(RECEIVE_PATH, _guarded(ctx, _receive))
    app.router.add_put(DISCARD_PATH, _guarded(ctx, discard))
    app.on_startup.append(_startup)
