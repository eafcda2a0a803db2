"""The sources and destinations of CONTRACT §1, from ``kind`` and ``args``.

Checking and resolving (paths, sizes, the OS) happens when the stream is
started, so that a bad request fails the RPC; opening (descriptors, the
script) happens in the stream's thread once the peer is there.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corral import errors
from corral import impexp_kinds as K
from corral.node.context import NodeContext
from corral.node.handlers.osdef import instance_spec, node_os
from corral.node.impexp import exports
from corral.node.impexp.engine import ImpExp
from corral.node.impexp.scripts import ScriptRun
from corral.node.impexp.sinks import DiscardSink, FileSink, ScriptSink, Sink
from corral.node.impexp.sources import FileSource, ScriptSource, Source, ZeroSource
from corral.node.storage import registry
from corral.osdef.env import instance_env
from corral.osdef.runner import log_file


@dataclass
class Opener:
    """Opens the endpoint in the stream's thread; ``path``: a file it creates."""

    open: Callable[[ImpExp], Any]
    path: Path | None = field(default=None)

    def __call__(self, stream: ImpExp) -> Any:
        return self.open(stream)


def _args(args: object, *keys: str) -> dict[str, Any]:
    if not isinstance(args, dict) or any(key not in args for key in keys):
        raise errors.OpExecError(f"Invalid arguments {args!r} (expected keys: {', '.join(keys)})")
    return args


def _index(inst: object, args: object) -> tuple[dict[str, Any], int]:
    if not isinstance(inst, dict) or not isinstance(inst.get("disks"), list):
        raise errors.OpExecError("The instance descriptor has no disk list")
    index = _args(args, "index")["index"]
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(inst["disks"]):
        raise errors.OpExecError(f"Invalid disk index {index!r}")
    return inst, index


def _description(inst: dict[str, Any], index: int) -> Any:
    disk = inst["disks"][index]
    if not isinstance(disk, dict) or disk.get("description") is None:
        raise errors.OpExecError(f"Disk {index} of the instance has no description")
    return disk["description"]


def _disk(
    ctx: NodeContext, inst: dict[str, Any], index: int, writing: bool = False
) -> tuple[Path, int, bool]:
    """The disk's local path, its size in bytes, whether it reads as zeros (fresh, sparse)."""
    data = _description(inst, index)
    template, desc = registry.resolve(ctx.paths, data)
    path = registry.plain_path(ctx.paths, data) if writing else template.attach(desc)
    return path, template.size(desc), template.SPARSE_WRITES


async def open_mirrored(
    ctx: NodeContext, stack: contextlib.AsyncExitStack, inst: object, kind: object, args: object
) -> Path | None:
    """For an import into a disk whose writes go through its mirror: the
    file that reaches every copy, open until ``stack`` closes; else None."""
    if kind not in (K.DISK, K.SCRIPT):
        return None
    desc, index = _index(inst, args)
    data = _description(desc, index)
    template, _ = registry.resolve(ctx.paths, data)
    if not template.MIRRORED:
        return None
    return await stack.enter_async_context(registry.local_path(ctx.paths, data))


def _script(
    ctx: NodeContext, inst: dict[str, Any], index: int, kind: str, path: Path
) -> ScriptRun | None:
    """The OS script ``kind`` for the disk at ``path``; None when the OS has
    none (raw data).  The other disks' paths in its environment are their
    local ones, to read."""
    spec = instance_spec(inst)
    osdef = node_os(ctx, spec.name)
    if not os.access(osdef.script(kind), os.X_OK):
        return None
    disks = []
    for number, disk in enumerate(inst["disks"]):
        template, desc = registry.resolve(ctx.paths, _description(inst, number))
        disks.append({**disk, "path": str(path if number == index else template.attach(desc))})
    local = {**inst, "disks": disks}
    env = instance_env(osdef, local, spec, int(inst.get("debug") or 0))
    hidden = spec.hidden_values()
    log_path = log_file(ctx.paths.log_dir, kind, osdef.name, f"{inst['name']}-disk{index}")
    return ScriptRun(osdef, kind, env, (index, str(path)), log_path, hidden)


def _script_source(script: ScriptRun, size: int | None) -> Opener:
    def start(stream: ImpExp) -> Source:
        source = ScriptSource(script, size)
        source.fd = script.start(stream.note, stream.set_size)
        return source

    return Opener(start)


def source_opener(
    ctx: NodeContext, inst: object, kind: object, args: object, size: int | None
) -> Opener:
    """Check and resolve a source of ``export_start``."""
    if kind in (K.DISK, K.SCRIPT):
        desc, index = _index(inst, args)
        path, disk_size, _ = _disk(ctx, desc, index)
        script = _script(ctx, desc, index, "export", path) if kind == K.SCRIPT else None
        if script is not None:
            return _script_source(script, size)
        return Opener(lambda _: FileSource(path, disk_size))
    if kind == K.FILE:
        given = _args(args, "export", "dump")
        dump = exports.dump_file(ctx.paths, given["export"], given["dump"])
        return Opener(lambda _: FileSource(dump, dump.stat().st_size))
    if kind == K.ZERO:
        count = _args(args, "size")["size"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise errors.OpExecError(f"Invalid size {count!r}")
        return Opener(lambda _: ZeroSource(count))
    raise errors.OpExecError(f"Unknown export source {kind!r}")


def _mirror_size(ctx: NodeContext, inst: dict[str, Any], index: int) -> tuple[int, bool]:
    """The size of a mirrored disk; and False: its copies may hold data
    (written through FUSE, zeroes must be written as such)."""
    template, desc = registry.resolve(ctx.paths, _description(inst, index))
    return template.size(desc), False


def _script_sink(script: ScriptRun) -> Opener:
    def start(stream: ImpExp) -> Sink:
        sink = ScriptSink(script)
        # The size an import script writes there is of no use: only read.
        sink.fd = script.start(stream.note, lambda _: None)
        return sink

    return Opener(start)


def sink_opener(
    ctx: NodeContext, inst: object, kind: object, args: object, mirrored: Path | None = None
) -> Opener:
    """Check and resolve a destination of ``import_start`` (a disk written
    through its mirror at ``mirrored``: :func:`open_mirrored`)."""
    if kind in (K.DISK, K.SCRIPT):
        desc, index = _index(inst, args)
        if mirrored is None:
            path, disk_size, sparse = _disk(ctx, desc, index, writing=True)
        else:
            path, (disk_size, sparse) = mirrored, _mirror_size(ctx, desc, index)
        script = _script(ctx, desc, index, "import", path) if kind == K.SCRIPT else None
        if script is not None:
            return _script_sink(script)
        return Opener(lambda _: FileSink(path, os.O_WRONLY, sparse=sparse, capacity=disk_size))
    if kind == K.FILE:
        given = _args(args, "export", "dump")
        name = exports.check_name(given["dump"], "file name")
        target = exports.new_dir(ctx.paths, given["export"]) / name
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        return Opener(lambda _: FileSink(target, flags, sparse=True, capacity=None), target)
    if kind == K.DISCARD:
        return Opener(lambda _: DiscardSink())
    raise errors.OpExecError(f"Unknown import destination {kind!r}")
