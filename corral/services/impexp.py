"""The master's side of disk imports and exports between nodes (Ganeti's
``masterd.instance`` import/export loop).

A transfer has two ends, each run by a node daemon: an *import* that
listens and writes what it receives (a disk, an OS import script, a file of
an export), and an *export* that connects to it and sends (a disk, an OS
export script, a file, zeros).  The master starts them with the node RPCs
``import_start``/``export_start``, follows them with ``impexp_wait`` (their
status once one of them ended, or after about a second), writes Ganeti's
progress lines to the job log, enforces Ganeti's time limits (ready,
listen, connect, status errors) and ends them with
``impexp_abort``/``impexp_cleanup``.  When one end fails its peer is
aborted; when the job is cancelled every end is aborted and forgotten.

Used by local exports (``OpBackupExport``), local imports
(``OpInstanceCreate`` mode import, through :func:`transfer_within_cluster`)
and the inter-cluster moves (remote export and import, through
:func:`start_export`/:func:`start_import` and :func:`follow`).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from corral import constants as C
from corral import errors
from corral import impexp_kinds as K
from corral.crypto.rie import disk_magic
from corral.objects import Node
from corral.rpc.calls_impexp import (
    ImpExpOptions,
    export_start,
    impexp_abort,
    impexp_cleanup,
    impexp_status,
    impexp_wait,
    import_start,
)
from corral.rpc.declare import Request
from corral.rpc.wire import JsonObject

if TYPE_CHECKING:
    from corral.services.context import Master

MIB = 1024 * 1024
IMPORT, EXPORT = "import", "export"
# Ganeti's ImportExportTimeouts (seconds): a started end must report a status
# within READY, an import listen within LISTEN; status calls may fail for ERROR.
READY_TIMEOUT = 10.0
LISTEN_TIMEOUT = 10.0
ERROR_TIMEOUT = 10.0
# Seconds between progress lines of one transfer while data moves (Ganeti
# writes one a minute; Corral's CLI draws a progress bar from them, so they
# come every poll), and while it stalls (Ganeti's interval).
PROGRESS_INTERVAL = 1.0
STALLED_PROGRESS_INTERVAL = 60.0
# Status rounds: quick at first (a small disk is done in a fraction of a
# second), then about once a second.  While following, a round is one
# impexp_wait per node, which answers as soon as one of its ends ended: an
# end is seen when it happens, not at the next round.
FIRST_POLL = 0.05
POLL_INTERVAL = 1.0


class Unit(Protocol):
    """What the service needs of a logical unit: the master and the job log."""

    master: Master

    def feedback(self, message: str) -> None: ...

    def warn(self, message: str) -> None: ...


@dataclass(eq=False)
class Endpoint:
    """One end of a transfer on one node.

    Made by the caller with ``node``, ``kind`` and ``args`` (a source or
    destination of the node RPCs); the service fills the rest.
    """

    node: Node
    kind: str
    args: dict[str, Any]
    name: str | None = None  # the node's impexp name once started
    port: int | None = None  # an import's listen port once known
    mode: str = IMPORT
    label: str = ""  # how the job log names it ("disk/0")
    peer: Endpoint | None = None  # the other end: aborted when this one fails
    started_at: float | None = None
    listening_at: float | None = None
    connected: bool = False
    aborted: bool = False
    success: bool | None = None  # None while it runs
    message: str | None = None  # why it failed
    status: dict[str, Any] | None = field(default=None, repr=False)
    # Progress lines: when the last one was written and the amount it showed;
    # errors: since when status calls fail.
    _progress_at: float = 0.0
    _progress_mbytes: float | None = None
    _failing_since: float | None = None


# Ganeti's FormatSeconds, FormatUnit(…, "h") and FormatProgress
def format_seconds(secs: float) -> str:
    """Ganeti's FormatSeconds: "2d 9h 19m 49s", "3s"."""
    rest = round(secs)
    parts: list[str] = []
    if rest > 0:
        for unit, one in (("d", 86400), ("h", 3600), ("m", 60)):
            count, rest = divmod(rest, one)
            if count or parts:
                parts.append(f"{count}{unit}")
    parts.append(f"{rest}s")
    return " ".join(parts)


def format_mib(mib: float) -> str:
    """Ganeti's FormatUnit(value, "h")."""
    if mib < 1024:
        return f"{round(mib)}M"
    if mib < 1024 * 1024:
        return f"{mib / 1024:.1f}G"
    return f"{mib / 1024 / 1024:.1f}T"


def format_progress(sent: int, size: int, seconds: float) -> str:
    """Ganeti's FormatProgress from bytes sent of ``size`` in ``seconds``."""
    rate = sent / MIB / seconds if seconds > 0 else 0.0
    eta = (size - sent) / MIB / rate if rate > 0 and size else None
    return format_status_progress(sent / MIB, rate, sent * 100 // size if size else None, eta)


def format_status_progress(
    mbytes: float, throughput: float, percent: int | None, eta: float | None
) -> str:
    """Ganeti's FormatProgress: amount, throughput, percentage, ETA."""
    parts = [format_mib(mbytes), f"{throughput:.1f} MiB/s"]
    if percent is not None:
        parts.append(f"{percent}%")
    if eta is not None:
        parts.append(f"ETA {format_seconds(eta)}")
    return ", ".join(parts)


class Reporter:
    """The job log lines of a transfer between two nodes of the cluster
    (Ganeti's TransferInstanceData); subclasses word the inter-cluster ones."""

    def listening(self, lu: Unit, ep: Endpoint) -> None:
        """An import listens (the export is started next)."""
        lu.feedback(f"{ep.label} is now listening, starting export")

    def connected(self, lu: Unit, ep: Endpoint) -> None:
        verb = "sending" if ep.mode == EXPORT else "receiving"
        lu.feedback(f"{ep.label} is {verb} data on {ep.node.name}")

    def progress(self, lu: Unit, ep: Endpoint, text: str) -> None:
        if ep.mode == EXPORT:
            lu.feedback(f"{ep.label} sent {text}")

    def finished(self, lu: Unit, ep: Endpoint) -> None:
        sending = ep.mode == EXPORT
        if ep.success:
            lu.feedback(f"{ep.label} finished {'sending' if sending else 'receiving'} data")
        else:
            lu.feedback(
                f"{ep.label} failed to {'send' if sending else 'receive'} data: {ep.message}"
                f" (recent output: {_recent(ep)})"
            )


class RemoteExportReporter(Reporter):
    """Ganeti's lines of an export to another cluster ("Disk 0 sent …")."""

    def connected(self, lu: Unit, ep: Endpoint) -> None:
        lu.feedback(f"Disk {_index(ep)} is now sending data")

    def progress(self, lu: Unit, ep: Endpoint, text: str) -> None:
        lu.feedback(f"Disk {_index(ep)} sent {text}")

    def finished(self, lu: Unit, ep: Endpoint) -> None:
        if ep.success:
            lu.feedback(f"Disk {_index(ep)} finished sending data")
        else:
            lu.feedback(
                f"Disk {_index(ep)} failed to send data: {ep.message}"
                f" (recent output: {_recent(ep)})"
            )


class RemoteImportReporter(Reporter):
    """Ganeti's lines of an import from another cluster ("Disk 0 is now listening")."""

    def listening(self, lu: Unit, ep: Endpoint) -> None:
        lu.feedback(f"Disk {_index(ep)} is now listening")

    def connected(self, lu: Unit, ep: Endpoint) -> None:
        lu.feedback(f"Disk {_index(ep)} is now receiving data")

    def finished(self, lu: Unit, ep: Endpoint) -> None:
        if ep.success:
            lu.feedback(f"Disk {_index(ep)} finished receiving data")
        else:
            lu.feedback(
                f"Disk {_index(ep)} failed to receive data: {ep.message}"
                f" (recent output: {_recent(ep)})"
            )


def _index(ep: Endpoint) -> str:
    return ep.label.rpartition("/")[2]


def _recent(ep: Endpoint) -> str:
    return "\n".join((ep.status or {}).get("recent_output") or [])


# Starting
async def start_import(
    lu: Unit,
    node: Node,
    opts: ImpExpOptions,
    instance_desc: dict[str, Any],
    component: str,
    kind: str,
    args: dict[str, Any],
) -> Endpoint:
    """Start an import on ``node`` (it listens at once); OpExecError if the node refuses."""
    ep = Endpoint(node, kind, args, mode=IMPORT, label=component)
    request = import_start(opts, instance_desc, component, kind, args)
    ep.name = await lu.master.rpc.run(node, request, f"Failed to start import on {node.name}")
    ep.started_at = time.monotonic()
    return ep


async def start_export(
    lu: Unit,
    node: Node,
    opts: ImpExpOptions,
    host: str,
    port: int,
    instance_desc: dict[str, Any],
    component: str,
    kind: str,
    args: dict[str, Any],
) -> Endpoint:
    """Start an export on ``node`` to ``host``:``port``; OpExecError if the node refuses."""
    ep = Endpoint(node, kind, args, mode=EXPORT, label=component)
    request = export_start(opts, host, port, instance_desc, component, kind, args)
    ep.name = await lu.master.rpc.run(node, request, f"Failed to start export on {node.name}")
    ep.started_at = time.monotonic()
    return ep


# Following
async def _poll(lu: Unit, endpoints: Sequence[Endpoint], wait: float | None = None) -> None:
    """One ``impexp_status`` per node for its running ends; updates each end.
    With ``wait``: ``impexp_wait`` instead, each node answering once one of
    its ends ended or after ``wait`` seconds."""
    by_node: dict[str, list[Endpoint]] = {}
    for ep in endpoints:
        if ep.success is None and ep.name is not None:
            by_node.setdefault(ep.node.uuid, []).append(ep)
    groups = list(by_node.values())

    def request(names: list[str]) -> Request[list[JsonObject | None]]:
        return impexp_status(names) if wait is None else impexp_wait(names, wait)

    answers = await asyncio.gather(
        *(
            lu.master.rpc.result(eps[0].node, request([str(ep.name) for ep in eps]))
            for eps in groups
        )
    )
    now = time.monotonic()
    for eps, res in zip(groups, answers, strict=True):
        if res.failed or len(res.payload) != len(eps):
            why = res.fail_msg or f"malformed answer {res.payload!r}"
            lu.warn(f"Failed to get daemon status on {eps[0].node.name}: {why}")
            for ep in eps:
                ep._failing_since = ep._failing_since or now
                if now - ep._failing_since > ERROR_TIMEOUT:
                    _fail(ep, "Too many errors while updating data")
            continue
        for ep, status in zip(eps, res.payload, strict=True):
            ep._failing_since = None
            if status is not None:
                ep.status = status
            elif ep.status is not None:
                _fail(ep, "The node no longer knows it (did its node daemon restart?)")
            elif now - (ep.started_at or now) > READY_TIMEOUT:
                _fail(ep, f"Didn't become ready after {READY_TIMEOUT:g} seconds")


def _fail(ep: Endpoint, message: str) -> None:
    if ep.success is None:
        ep.success, ep.message = False, message


def _check_listening(lu: Unit, ep: Endpoint, reporter: Reporter | None) -> bool:
    """Whether an import listens (reported once); fails it after LISTEN_TIMEOUT."""
    if ep.mode == EXPORT or ep.listening_at is not None:
        return True
    port = (ep.status or {}).get("listen_port")
    if port is not None:
        ep.port, ep.listening_at = int(port), time.monotonic()
        if reporter is not None:
            reporter.listening(lu, ep)
        return True
    if time.monotonic() - (ep.started_at or 0.0) > LISTEN_TIMEOUT:
        _fail(ep, f"Not listening after {LISTEN_TIMEOUT:g} seconds")
    return False


def _check_connected(lu: Unit, ep: Endpoint, reporter: Reporter, connect_timeout: float) -> None:
    if ep.connected:
        return
    if (ep.status or {}).get("connected"):
        ep.connected = True
        reporter.connected(lu, ep)
        return
    since = ep.listening_at if ep.mode == IMPORT else ep.started_at
    if since is not None and time.monotonic() - since > connect_timeout:
        _fail(ep, f"Not connected after {connect_timeout:g} seconds")


def _check_progress(lu: Unit, ep: Endpoint, reporter: Reporter) -> None:
    status = ep.status or {}
    mbytes, rate = status.get("progress_mbytes"), status.get("progress_throughput")
    if mbytes is None or rate is None:
        return
    now = time.monotonic()
    interval = PROGRESS_INTERVAL if mbytes != ep._progress_mbytes else STALLED_PROGRESS_INTERVAL
    if now - ep._progress_at < interval:
        return
    ep._progress_at, ep._progress_mbytes = now, mbytes
    text = format_status_progress(
        float(mbytes), float(rate), status.get("progress_percent"), status.get("progress_eta")
    )
    reporter.progress(lu, ep, text)


def _step(lu: Unit, ep: Endpoint, reporter: Reporter, connect_timeout: float) -> None:
    """Advance one running end by its latest status (Ganeti's loop body)."""
    status = ep.status
    if status is None:
        return
    if status.get("exit_status") is not None:
        if status["exit_status"] == 0:
            ep.success = True
        else:
            _fail(ep, status.get("error_message") or f"exit status {status['exit_status']}")
        return
    if _check_listening(lu, ep, reporter):
        _check_connected(lu, ep, reporter, connect_timeout)
        _check_progress(lu, ep, reporter)


async def _finish(lu: Unit, ep: Endpoint, reporter: Reporter) -> None:
    """Report an end that just ended; a failed end takes its peer down."""
    if not ep.success:
        lu.warn(f"{ep.mode} '{ep.name}' on {ep.node.name} failed: {ep.message}")
    reporter.finished(lu, ep)
    if not ep.success and ep.peer is not None and ep.peer.success is None:
        await _abort(lu, ep.peer)


def _round_length(running: Sequence[Endpoint], delay: float, now: float) -> float:
    """``delay``, cut short to end when a progress line falls due (they then
    come every PROGRESS_INTERVAL, not whenever the doubling rounds allow).
    A line overdue (the transfer stalls, so none was written) is no reason."""
    due = [ep._progress_at + PROGRESS_INTERVAL - now for ep in running if ep._progress_at]
    return max(FIRST_POLL, min([delay, *(d for d in due if d > 0)]))


async def follow(
    lu: Unit,
    endpoints: list[Endpoint],
    components: list[str],
    *,
    connect_timeout: float,
    on_update: Reporter | None = None,
) -> list[bool]:
    """Follow started ends until each succeeded or failed; success per end.

    ``components`` name the ends in the job log ("disk/0"); ``on_update``
    words the lines (default: a transfer inside the cluster).  Cancelled
    (the job was), it aborts every running end before it lets go.
    """
    reporter = on_update or Reporter()
    for ep, component in zip(endpoints, components, strict=True):
        ep.label = component
    delay = FIRST_POLL
    try:
        while True:
            running = [ep for ep in endpoints if ep.success is None]
            if not running:
                return [bool(ep.success) for ep in endpoints]
            began = time.monotonic()
            length = _round_length(running, delay, began)
            await _poll(lu, running, wait=length)
            for ep in running:
                _step(lu, ep, reporter, connect_timeout)
                if ep.success is not None:
                    await _finish(lu, ep, reporter)
            # A round cut short without an end (a node that cannot be reached
            # answers at once) still lasts its length: no storm of warnings.
            rest = length - (time.monotonic() - began)
            if rest > 0 and all(ep.success is None for ep in running):
                await asyncio.sleep(rest)
            delay = min(POLL_INTERVAL, delay * 2)
    except asyncio.CancelledError:
        await asyncio.shield(_abort_all(lu, endpoints))
        raise


async def wait_listening(
    lu: Unit, imports: list[Endpoint], timeout: float, reporter: Reporter | None = None
) -> None:
    """Wait until every import listens (its ``port`` known); OpExecError when
    one ends or does not listen within ``timeout`` seconds.  ``reporter``,
    if given, writes its "listening" line for each."""
    deadline = time.monotonic() + timeout
    delay = FIRST_POLL
    try:
        while True:
            await _poll(lu, imports)
            waiting = []
            for ep in imports:
                status = ep.status or {}
                if status.get("exit_status") is not None:
                    _fail(ep, status.get("error_message") or "it ended before listening")
                if ep.success is False:
                    raise errors.OpExecError(
                        f"Import '{ep.name}' on {ep.node.name} failed: {ep.message}"
                    )
                if not _check_listening(lu, ep, reporter):
                    waiting.append(ep)
            if not waiting:
                return
            if time.monotonic() > deadline:
                names = ", ".join(f"{ep.label} on {ep.node.name}" for ep in waiting)
                raise errors.OpExecError(f"Not listening after {timeout:g} seconds: {names}")
            await asyncio.sleep(delay)
            delay = min(POLL_INTERVAL, delay * 2)
    except asyncio.CancelledError:
        await asyncio.shield(_abort_all(lu, imports))
        raise


# Ending
async def _abort(lu: Unit, ep: Endpoint) -> None:
    """Stop a running end; its next status shows it failed."""
    if ep.name is None or ep.success is not None or ep.aborted:
        return
    ep.aborted = True
    lu.warn(f"Aborting {ep.mode} '{ep.name}' on {ep.node.name}")
    what = f"Failed to abort {ep.mode} '{ep.name}' on {ep.node.name}"
    await lu.master.rpc.attempt(ep.node, impexp_abort(ep.name), lu.warn, what)


async def _abort_all(lu: Unit, endpoints: Sequence[Endpoint]) -> None:
    await asyncio.gather(*(_abort(lu, ep) for ep in endpoints))


async def cleanup(lu: Unit, endpoints: Sequence[Endpoint]) -> None:
    """Abort the ends still running and make their nodes forget them (an
    import that did not succeed removes what it wrote); failures are warnings."""

    async def one(ep: Endpoint) -> None:
        if ep.name is None:
            return
        await _abort(lu, ep)
        what = f"Failed to finalize {ep.mode} '{ep.name}' on {ep.node.name}"
        await lu.master.rpc.attempt(ep.node, impexp_cleanup(ep.name), lu.warn, what)
        ep.name = None

    await asyncio.shield(asyncio.gather(*(one(ep) for ep in endpoints)))


# A transfer inside the cluster
def _size_bytes(instance_desc: dict[str, Any], src: Endpoint) -> int | None:
    """The bytes a disk or script source sends (its disk's size), for percent and ETA."""
    index = src.args.get("index")
    disks = instance_desc.get("disks") or []
    if src.kind in (K.DISK, K.SCRIPT) and isinstance(index, int) and 0 <= index < len(disks):
        return int(disks[index]["size"]) * MIB
    if src.kind == K.ZERO:
        return int(src.args["size"])
    return None


async def transfer_within_cluster(
    lu: Unit,
    pairs: list[tuple[Endpoint, Endpoint]],
    instance_desc_src: dict[str, Any],
    instance_desc_dst: dict[str, Any],
    compress: str,
    reporter: Reporter | None = None,
) -> list[bool]:
    """Copy ``pairs`` of (source, destination) ends, not yet started, between
    nodes of this cluster; success per pair (Ganeti's TransferInstanceData).

    Pair ``i`` is "disk/i".  Imports start first; each export then sends to
    its import's node (primary address) with the cluster's certificates and a
    fresh magic per disk.  Every end is cleaned up, also on cancellation.
    ``reporter`` words the job log lines (default: :class:`Reporter`'s).
    """
    base = secrets.token_hex(6)
    name = str(instance_desc_src.get("name", ""))
    started: list[Endpoint] = []
    try:
        imports = []
        for index, (src, dst) in enumerate(pairs):
            lu.feedback(f"Exporting disk/{index} from {src.node.name} to {dst.node.name}")
            opts = _local_opts(compress, disk_magic(base, name, index))
            opts["size"] = _size_bytes(instance_desc_src, src)
            imp = await start_import(
                lu, dst.node, opts, instance_desc_dst, f"disk/{index}", dst.kind, dst.args
            )
            started.append(imp)
            imports.append((imp, opts))
        await wait_listening(lu, [imp for imp, _ in imports], LISTEN_TIMEOUT, Reporter())
        ends: list[Endpoint] = []
        for (src, _), (imp, opts) in zip(pairs, imports, strict=True):
            assert imp.port is not None
            exp = await start_export(
                lu,
                src.node,
                opts,
                imp.node.primary_ip,
                imp.port,
                instance_desc_src,
                imp.label,
                src.kind,
                src.args,
            )
            started.append(exp)
            exp.peer, imp.peer = imp, exp
            ends += [exp, imp]
        ok = await follow(
            lu,
            ends,
            [ep.label for ep in ends],
            connect_timeout=C.DISK_TRANSFER_CONNECT_TIMEOUT,
            on_update=reporter,
        )
        return [ok[2 * i] and ok[2 * i + 1] for i in range(len(pairs))]
    finally:
        await cleanup(lu, started)


def _local_opts(compress: str, magic: str) -> ImpExpOptions:
    """Options of a transfer inside the cluster: the nodes' cluster certificates."""
    return {
        "key_name": None,
        "ca_pem": None,
        "compress": compress,
        "magic": magic,
        "connect_timeout": C.DISK_TRANSFER_CONNECT_TIMEOUT,
        "bind_address": None,
        "size": None,
    }
