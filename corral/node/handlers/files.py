"""The upload_file call: the master distributes cluster files to the nodes.

Only a fixed set of files may be written (ssconf files, the cluster domain
secret, the confd key, the configuration, the certificate files): a holder of
the client certificate must not be able to write arbitrary files as root.
File names travel as production paths (``/var/lib/ganeti/...``) and land
below this node's root.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import grp
import pwd
from pathlib import Path

from corral import errors, ssconf_files
from corral.fileio import atomic_write
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.paths import Paths
from corral.rpc import calls_node as calls


def upload_allowed(paths: Paths, target: Path) -> bool:
    """Whether upload_file may write ``target`` (a path below the node's root)."""
    fixed = {
        paths.cluster_domain_secret,
        paths.ca_cert,
        paths.ca_key,
        paths.server_pem,
        paths.client_pem,
        paths.confd_hmac_key,
        *paths.candidate_files,
    }
    if target in fixed:
        return True
    name = target.name
    key = name.removeprefix("ssconf_")
    return target.parent == paths.data_dir and key != name and bool(ssconf_files.KEY_RE.match(key))


def _owner_id(value: int | str | None, kind: str) -> int | None:
    """A user or group id from an id, a name, or None (keep the current one)."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if not isinstance(value, str):
        raise errors.OpExecError(f"Invalid {kind}: {value!r}")
    try:
        return pwd.getpwnam(value).pw_uid if kind == "user" else grp.getgrnam(value).gr_gid
    except KeyError:
        raise errors.OpExecError(f"Unknown {kind} {value!r}") from None


def _times(atime: float | None, mtime: float | None) -> tuple[float, float] | None:
    if atime is None and mtime is None:
        return None
    if atime is None or mtime is None:
        raise errors.OpExecError("upload_file: give both atime and mtime, or neither")
    return float(atime), float(mtime)


@rpc_handler(calls.upload_file)
async def upload_file(
    ctx: NodeContext,
    file_name: str,
    data: str,
    mode: int,
    uid: int | str | None,
    gid: int | str | None,
    atime: float | None,
    mtime: float | None,
) -> None:
    """Write ``data`` (base64) to the allowed file ``file_name``, atomically."""
    try:
        target = ctx.paths.from_wire(str(file_name))
    except ValueError as err:
        raise errors.OpExecError(f"upload_file: {err}") from None
    if not upload_allowed(ctx.paths, target):
        raise errors.OpExecError(f"upload_file: {file_name} is not a file that can be uploaded")
    try:
        content = base64.b64decode(data, validate=True)
    except (binascii.Error, TypeError, ValueError) as err:
        raise errors.OpExecError(f"upload_file: invalid base64 data: {err}") from None
    if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 0o7777:
        raise errors.OpExecError(f"upload_file: invalid mode {mode!r}")
    owner = _owner_id(uid, "user"), _owner_id(gid, "group")
    times = _times(atime, mtime)
    # A synced write: off the event loop (confd and the other calls go on).
    await asyncio.to_thread(
        atomic_write, target, content, mode=mode, uid=owner[0], gid=owner[1], times=times
    )
