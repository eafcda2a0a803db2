"""Calls of node administration: what a file storage directory holds."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from corral import errors
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.storage import registry
from corral.node.storage.file import FileTemplate
from corral.storage.units import StorageUnit

_MIB = 1024 * 1024


def _usage(top: Path) -> dict[str, int]:
    """MiB of the file system holding ``top`` and free in it, and of the files below it."""
    st = os.statvfs(top)
    used = 0
    for dirpath, _dirs, files in os.walk(top):
        for name in files:
            try:
                used += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue  # removed while walking
    return {
        "size": st.f_blocks * st.f_frsize // _MIB,
        "used": -(-used // _MIB),
        "free": st.f_bavail * st.f_frsize // _MIB,
    }


@rpc_handler("file_storage_usage")
async def file_storage_usage(ctx: NodeContext, storage_unit: Any) -> dict[str, Any]:
    """Size, use and free space (MiB) of the file storage directory of the
    storage unit ``[file or sharedfile, directory]``."""
    unit = StorageUnit.from_wire(storage_unit)
    template = registry.unit_template(ctx.paths, unit)
    if not isinstance(template, FileTemplate):
        raise errors.OpExecError(f"Storage type {unit.storage_type} keeps no files")
    top = template.unit_dir(unit.key)
    try:
        usage = await asyncio.to_thread(_usage, top)
    except OSError as err:
        raise errors.OpExecError(f"Cannot get the usage of {unit.key}: {err}") from None
    return {"name": unit.key, **usage}
