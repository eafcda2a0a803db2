"""The imports and exports running on this node, by name: started, followed,
stopped and forgotten by the RPC handlers (:mod:`corral.node.handlers.impexp`).

Each one runs in threads of its own; nothing here blocks the event loop for
longer than a check of the arguments.  The records live in memory only: a
noded that restarts has no streams (its threads died with it); what they
left on disk is removed at start (:func:`startup`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corral import errors
from corral import impexp_kinds as K
from corral.node.context import NodeContext
from corral.node.impexp import channel, endpoints, exports, x509keys
from corral.node.impexp.engine import ImpExp
from corral.node.impexp.exporter import ExportPlan, export
from corral.node.impexp.importer import ImportPlan, run_import
from corral.node.impexp.wire import COMPRESSIONS

# Ganeti's rules for the magic, and its default connect time-out.
_MAGIC_RE = re.compile(r"^[-_.a-zA-Z0-9]{5,100}$")
DEFAULT_CONNECT_TIMEOUT = 60
_COMPONENT_RE = re.compile(r"^disk/\d{1,3}$")
# How long impexp_cleanup waits for a stopped stream's threads.
JOIN_TIMEOUT = 30.0
# How long an import's end waits for its mirrored disk's FUSE export to stop.
MIRROR_CLOSE_TIMEOUT = 60.0
# A stream that ended is forgotten after this long if nobody cleaned it up.
KEEP_FINISHED = 3600.0
# The longest impexp_wait (seconds): the master asks again, well within its RPC timeout.
MAX_WAIT = 30.0


@dataclass
class Options:
    """The ``opts`` of import_start/export_start, checked."""

    key_name: str | None
    ca_pem: str | None
    compress: str
    magic: str
    connect_timeout: float
    bind_address: str | None
    size: int | None


_STREAMS: dict[str, ImpExp] = {}
# Files that imports write in an export being built: removed if they fail.
_WRITTEN: dict[str, Path] = {}


def _optional(opts: dict[str, Any], key: str, kind: type) -> Any:
    value = opts.get(key)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise errors.OpExecError(f"Invalid import/export option {key}={value!r}")
    return value


def check_options(paths: Any, opts: object) -> Options:
    """The options, or OpExecError naming the bad one."""
    if not isinstance(opts, dict):
        raise errors.OpExecError("The import/export options must be a dict")
    key_name = _optional(opts, "key_name", str)
    if key_name is not None:
        x509keys.files(paths, key_name)
    compress = opts.get("compress") or "none"
    if compress not in COMPRESSIONS:
        raise errors.OpExecError(f"Unknown compression {compress!r}")
    magic = _optional(opts, "magic", str) or ""
    if magic and not _MAGIC_RE.match(magic):
        raise errors.OpExecError(f"Invalid magic {magic!r}")
    timeout = opts.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise errors.OpExecError(f"Invalid connect_timeout {timeout!r}")
    size = _optional(opts, "size", int)
    if size is not None and size < 0:
        raise errors.OpExecError(f"Invalid size {size!r}")
    return Options(
        key_name,
        _optional(opts, "ca_pem", str),
        compress,
        magic,
        float(timeout),
        _optional(opts, "bind_address", str),
        size,
    )


def _component(component: object) -> str:
    if not isinstance(component, str) or not _COMPONENT_RE.match(component):
        raise errors.OpExecError(f"Invalid component {component!r} (expected disk/<index>)")
    return component


def _forget_stale() -> None:
    """Forget the streams that ended long ago and nobody cleaned up (a master
    that died meanwhile); a failed import's file goes with it."""
    now = time.monotonic()
    for name, stream in list(_STREAMS.items()):
        if stream.ended_at is not None and now - stream.ended_at > KEEP_FINISHED:
            del _STREAMS[name]
            _drop_written(stream)


def _drop_written(stream: ImpExp) -> None:
    """Remove the file a failed import wrote (a successful one's stays)."""
    written = _WRITTEN.pop(stream.name, None)
    if written is not None and stream.exit_status != 0:
        with contextlib.suppress(FileNotFoundError):
            written.unlink()


def _register(mode: str, component: str, size: int | None) -> ImpExp:
    _forget_stale()
    name = f"{mode}-{component.replace('/', '')}-{secrets.token_hex(6)}"
    stream = ImpExp(name, mode, component, size)
    _STREAMS[name] = stream
    return stream


async def start_import(
    ctx: NodeContext, opts: object, instance: object, component: object, kind: object, args: object
) -> str:
    """Listen and start the import; its name (the port is in its status at once)."""
    options = check_options(ctx.paths, opts)
    part = _component(component)
    # A mirrored disk is written through the file that reaches every copy,
    # open until the stream has ended (before it says so).
    mirror = contextlib.AsyncExitStack()
    try:
        through = await endpoints.open_mirrored(ctx, mirror, instance, kind, args)
        opener = await asyncio.to_thread(endpoints.sink_opener, ctx, instance, kind, args, through)
        context = channel.server_context(ctx.paths, options.key_name, options.ca_pem)
        listener = channel.listen(options.bind_address or ctx.address)
    except BaseException:
        await mirror.aclose()
        raise
    stream = _register("import", part, options.size)
    stream.listener = listener
    stream.listen_port = listener.getsockname()[1]
    stream.note(f"listening on port {stream.listen_port}")
    if opener.path is not None:
        _WRITTEN[stream.name] = opener.path
    plan = ImportPlan(context, options.connect_timeout, options.magic, options.compress, opener)
    loop = asyncio.get_running_loop()

    def body(stream: ImpExp) -> None:
        try:
            run_import(plan, stream, listener)
        finally:
            closing = asyncio.run_coroutine_threadsafe(mirror.aclose(), loop)
            with contextlib.suppress(RuntimeError, TimeoutError):  # noded stopping
                closing.result(MIRROR_CLOSE_TIMEOUT)

    stream.run(body)
    return stream.name


async def start_export(
    ctx: NodeContext,
    opts: object,
    host: object,
    port: object,
    instance: object,
    component: object,
    kind: object,
    args: object,
) -> str:
    """Start sending to the import at ``host``:``port``; the export's name."""
    options = check_options(ctx.paths, opts)
    part = _component(component)
    if not isinstance(host, str) or not host:
        raise errors.OpExecError(f"Invalid host {host!r}")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise errors.OpExecError(f"Invalid port {port!r}")
    opener = await asyncio.to_thread(
        endpoints.source_opener, ctx, instance, kind, args, options.size
    )
    context = channel.client_context(ctx.paths, options.key_name, options.ca_pem)
    stream = _register("export", part, options.size)
    plan = ExportPlan(
        host,
        port,
        context,
        options.connect_timeout,
        options.magic,
        options.compress,
        opener,
        hashed=kind != K.ZERO,
    )
    stream.run(lambda s: export(plan, s))
    return stream.name


def _names(names: object) -> list[str]:
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise errors.OpExecError(f"Invalid import/export names {names!r}")
    return names


def status(names: object) -> list[dict[str, Any] | None]:
    """The status of each named stream (None: unknown here)."""
    return [_STREAMS[n].status() if n in _STREAMS else None for n in _names(names)]


async def wait(names: object, timeout: object) -> list[dict[str, Any] | None]:
    """:func:`status`, once one of the named streams has ended (at once if
    one had) or after ``timeout`` seconds (at most MAX_WAIT).

    The master follows its streams with this instead of sleeping between
    status calls, so it sees an end when it happens; each stream wakes its
    waiters from its own thread as it ends.  Unknown names never end a wait.
    """
    wanted = _names(names)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
        raise errors.OpExecError(f"Invalid wait timeout {timeout!r}")
    loop = asyncio.get_running_loop()
    ended = asyncio.Event()

    def wake() -> None:
        # From the stream's thread; the loop may be gone if noded is stopping.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(ended.set)

    watched = []
    try:
        for stream in (_STREAMS[n] for n in wanted if n in _STREAMS):
            if not stream.watch(wake):
                ended.set()
                break
            watched.append(stream)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ended.wait(), min(float(timeout), MAX_WAIT))
    finally:
        for stream in watched:
            stream.unwatch(wake)
    return status(wanted)


def abort(name: object) -> None:
    """Stop the stream ``name``."""
    stream = _STREAMS.get(name) if isinstance(name, str) else None
    if stream is None:
        raise errors.OpExecError(f"No import/export {name!r} on this node")
    stream.abort()


async def cleanup(name: object) -> None:
    """Forget ``name`` (stopping it first); a failed import's file goes too."""
    stream = _STREAMS.pop(name, None) if isinstance(name, str) else None
    if stream is None:
        return
    stream.abort()  # a no-op for a stream that ended
    if stream.thread is not None:
        await asyncio.to_thread(stream.thread.join, JOIN_TIMEOUT)
    _drop_written(stream)


def abort_writers(directory: Path) -> None:
    """Stop the imports writing files in ``directory`` (about to be removed)."""
    for name, path in list(_WRITTEN.items()):
        stream = _STREAMS.get(name)
        if stream is not None and path.parent == directory:
            stream.abort()


def startup(ctx: NodeContext) -> None:
    """At noded's start: remove what dead streams and moves left behind."""
    exports.purge_unfinished(ctx.paths)
    x509keys.purge_expired(ctx.paths)


def shutdown() -> None:
    """At noded's stop: stop every stream (their threads end on their own)."""
    for stream in list(_STREAMS.values()):
        stream.abort()
