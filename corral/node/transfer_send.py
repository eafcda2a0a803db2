"""The sending side of a disk copy between two nodeds.

``transfer_send`` starts a background copy: for each disk, one HTTPS PUT to
the target noded (mutual TLS: this node presents the cluster's client
certificate and checks the target's against the cluster CA) whose body is the
disk's content (read by :mod:`corral.node.transfer_io`), in large chunks;
aiohttp waits for the socket to drain before it takes the next chunk
(back-pressure).  The bytes sent so far are
recorded for ``transfer_status``; at each disk's end the target's count and
checksum must match this side's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from corral import errors
from corral.crypto.tls import ssl_client_context
from corral.node.context import NodeContext
from corral.node.storage import registry
from corral.node.storage.base import CHUNK, NodeTemplate
from corral.node.transfer_io import read_disk
from corral.node.transfer_receive import DISCARD_PATH, check_id
from corral.node.transfer_stream import Checksum, new_digest
from corral.storage.disk import DiskDescription

MIB = 1024 * 1024
RUNNING, DONE, FAILED = "running", "done", "failed"
# A copy that moves no byte for this long fails (a stalled target, a lost master).
STALL_TIMEOUT = 120.0
CONNECT_TIMEOUT = 10.0
# A finished copy nobody asks about is forgotten after this long.
KEEP_FINISHED = 3600.0


@dataclass
class Outgoing:
    """One copy this node sends, as ``transfer_status`` reports it."""

    transfer_id: str
    target: str
    sizes: list[int]
    sent: list[int]
    # When each disk's sending started and how long it took (monotonic seconds).
    started: list[float | None]
    seconds: list[float | None]
    state: str = RUNNING
    error: str | None = None
    paused: bool = False
    # How many disks (from the first) the target confirmed.
    confirmed: int = 0
    task: asyncio.Task[None] | None = None
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    def start(self, copy: Coroutine[Any, Any, None]) -> None:
        self.task = asyncio.create_task(copy)

    def status(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "error": self.error,
            "paused": self.paused,
            "disks": [self._disk(index) for index in range(len(self.sizes))],
        }

    def _disk(self, index: int) -> dict[str, Any]:
        started, took = self.started[index], self.seconds[index]
        if started is not None and took is None:
            took = time.monotonic() - started
        return {
            "sent": self.sent[index],
            "size": self.sizes[index],
            "started": started is not None,
            # The target confirmed every byte.
            "done": index < self.confirmed,
            "seconds": round(took or 0.0, 3),
        }


# transfer id → what this noded sends.
_OUTGOING: dict[str, Outgoing] = {}


class Gate:
    """Test-only: while closed, each disk's send pauses after its first chunk."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.open.set()

    async def passage(self, out: Outgoing) -> None:
        if self.open.is_set():
            return
        out.paused = True
        try:
            await self.open.wait()
        finally:
            out.paused = False


GATE = Gate()


def _mib(n: int) -> str:
    return f"{n / MIB:.1f} MiB"


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def session(ctx: NodeContext) -> aiohttp.ClientSession:
    """A session to other nodeds under the cluster's client certificate."""
    connector = aiohttp.TCPConnector(ssl=ssl_client_context(ctx.paths), limit=4)
    return aiohttp.ClientSession(connector=connector)


async def _reply(resp: aiohttp.ClientResponse) -> Any:
    """The payload of a noded ``[success, payload]`` answer; OpExecError on failure."""
    body = await resp.read()
    try:
        success, payload = json.loads(body)
    except (ValueError, TypeError):
        text = body[:200].decode("utf-8", "replace")
        raise errors.OpExecError(f"Invalid answer (HTTP {resp.status}): {text!r}") from None
    if resp.status != 200 or success is not True:
        raise errors.OpExecError(str(payload))
    return payload


async def _body(
    out: Outgoing, index: int, template: NodeTemplate, disk: DiskDescription, digest: Checksum
) -> AsyncIterator[bytes | memoryview]:
    """The disk's bytes, checksummed and counted as the connection takes them."""
    timer = asyncio.timeout(None)
    async with timer:
        async for chunk in read_disk(template, disk, digest):
            timer.reschedule(asyncio.get_running_loop().time() + STALL_TIMEOUT)
            yield chunk
            out.sent[index] += len(chunk)
            timer.reschedule(None)
            await GATE.passage(out)


async def _send_disk(
    ctx: NodeContext, http: aiohttp.ClientSession, out: Outgoing, index: int, disk: DiskDescription
) -> None:
    template = registry.template_of(ctx.paths, disk)
    digest = new_digest()
    url = f"https://{_host(out.target)}:{ctx.port}/transfer/{out.transfer_id}/{index}"
    headers = {"Content-Length": str(out.sizes[index]), "Content-Type": "application/octet-stream"}
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT)
    start = out.started[index] = time.monotonic()
    try:
        body = _body(out, index, template, disk, digest)
        async with http.put(url, data=body, headers=headers, timeout=timeout) as resp:
            answer = await _reply(resp)
    finally:
        out.seconds[index] = time.monotonic() - start
    if answer.get("bytes") != out.sizes[index] or answer.get("digest") != digest.hexdigest():
        raise errors.OpExecError(
            f"the target received {answer.get('bytes')} bytes with digest"
            f" {answer.get('digest')}, not the {out.sizes[index]} bytes with digest"
            f" {digest.hexdigest()} sent"
        )
    out.confirmed = index + 1


def _why(err: BaseException) -> str:
    if isinstance(err, errors.GenericError):
        return err.message
    if isinstance(err, TimeoutError):
        return f"no progress for {STALL_TIMEOUT:g} s"
    inner = getattr(err, "os_error", None) or err
    return str(inner) or err.__class__.__name__


async def _run(ctx: NodeContext, out: Outgoing, disks: list[DiskDescription]) -> None:
    index = 0
    try:
        async with session(ctx) as http:
            for index, disk in enumerate(disks):
                await _send_disk(ctx, http, out, index, disk)
        out.state = DONE
    except asyncio.CancelledError:
        out.state, out.error = FAILED, "the transfer was cancelled"
        raise
    except (errors.GenericError, aiohttp.ClientError, OSError, TimeoutError) as err:
        out.state = FAILED
        out.error = (
            f"disk/{index} to {out.target}: {_why(err)} (after {_mib(out.sent[index])}"
            f" of {_mib(out.sizes[index])})"
        )
    finally:
        out.ended.set()
        asyncio.get_running_loop().call_later(
            KEEP_FINISHED, lambda: _OUTGOING.pop(out.transfer_id, None)
        )


async def send(ctx: NodeContext, transfer_id: Any, target: Any, disks: Any) -> None:
    """Start sending ``disks`` to the node at ``target`` under ``transfer_id``."""
    tid = check_id(transfer_id)
    if tid in _OUTGOING:
        raise errors.OpExecError(f"Transfer {tid} is already being sent")
    if not isinstance(target, str) or not target:
        raise errors.OpExecError(f"Invalid target address {target!r}")
    if not isinstance(disks, list) or not disks:
        raise errors.OpExecError(f"Invalid disk list {disks!r}")
    resolved = [registry.resolve(ctx.paths, d) for d in disks]
    sizes = [await asyncio.to_thread(t.size, d) for t, d in resolved]
    none: list[float | None] = [None] * len(sizes)
    out = Outgoing(tid, target, sizes, [0] * len(sizes), list(none), list(none))
    _OUTGOING[tid] = out
    out.start(_run(ctx, out, [d for _, d in resolved]))


async def status(transfer_id: Any, wait: Any) -> dict[str, Any]:
    """The copy's progress, once it ended or after ``wait`` seconds."""
    out = _OUTGOING.get(check_id(transfer_id))
    if out is None:
        raise errors.OpExecError(f"No transfer {transfer_id} is sent by this node")
    if isinstance(wait, int | float) and not isinstance(wait, bool) and wait > 0:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(out.ended.wait(), min(float(wait), 60.0))
    return out.status()


async def finish(transfer_id: str) -> bool:
    """Stop sending ``transfer_id`` (if it still runs) and forget it; whether it was here."""
    out = _OUTGOING.pop(transfer_id, None)
    if out is None:
        return False
    if out.task is not None and not out.task.done():
        out.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await out.task
    return True


async def _filler(size: int) -> AsyncIterator[bytes]:
    block = b"\xa5" * CHUNK  # one buffer, sent again and again: nothing read
    remaining = size
    while remaining:
        yield block if remaining >= CHUNK else block[:remaining]
        remaining -= min(CHUNK, remaining)


async def tls_copy(ctx: NodeContext, target: Any, size: Any) -> dict[str, Any]:
    """Send ``size`` bytes to the noded at ``target``, which drops them (the
    baseline of the move benchmark): the bytes and the seconds it took."""
    if not isinstance(target, str) or not target:
        raise errors.OpExecError(f"Invalid target address {target!r}")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise errors.OpExecError(f"Invalid size {size!r}")
    url = f"https://{_host(target)}:{ctx.port}{DISCARD_PATH}"
    headers = {"Content-Length": str(size), "Content-Type": "application/octet-stream"}
    start = time.monotonic()
    async with session(ctx) as http, http.put(url, data=_filler(size), headers=headers) as resp:
        answer = await _reply(resp)
    return {"bytes": answer["bytes"], "seconds": time.monotonic() - start}
