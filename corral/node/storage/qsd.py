"""qemu-storage-daemon for mirrored disks: the secondary's NBD export of its
copy, and the primary's quorum over both copies exported by FUSE.

Each disk of the ``mirrored`` template is a raw file on two nodes.  The
secondary exports its copy over NBD with TLS under the cluster CA; the
primary opens a ``quorum`` block node (vote-threshold 2) over its own file and
that export, so a write is acknowledged only once both copies have it: in the
guest's QEMU while the instance runs, in a q-s-d with a FUSE export while it
is stopped (OS scripts write the disk through the mounted file).

Each daemon has a pidfile and a QMP socket in ``<run_dir>/mirror``, named by
disk and role (``nbd`` or ``fuse``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import tempfile
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from corral import errors
from corral.node import qemu_process, qemu_tls
from corral.paths import Paths

QSD = "/usr/bin/qemu-storage-daemon"
ROLE_NBD = "nbd"
ROLE_FUSE = "fuse"
ROLES = (ROLE_NBD, ROLE_FUSE)
# Not the migration's id: a guest's QEMU holds both objects at once.
CREDS_ID = "corral-mirtls"
# The node names of a mirrored disk's block graph: each prefix and the disk's tag.
QUORUM_PREFIX, LOCAL_PREFIX, PEER_PREFIX = "mirror-", "local-", "peer-"
# The child that takes the place of a secondary whose copy is behind.
NULL_PREFIX = "null-"
NBD_MAGIC = b"NBDMAGIC"
# SIGTERM lets q-s-d unmount its FUSE export and flush; one that does not
# exit by then (stopped, hung on its peer) is killed.
_TERM_WAIT = 10.0
_KILL_WAIT = 30.0
_POLL = 0.02
# QEMU's node names: at most 31 characters, starting with a letter.
_TAG_KEEP = 12
_TAG_HASH = 12
# One start or stop at a time per daemon (idempotence under concurrent calls).
_locks: dict[tuple[str, str, str], asyncio.Lock] = {}


def mirror_dir(paths: Paths) -> Path:
    """Where the daemons' pidfiles and QMP sockets are (0700)."""
    return paths.run_dir / "mirror"


def pidfile(paths: Paths, disk_uuid: str, role: str) -> Path:
    """The pidfile of the ``role`` daemon of the disk."""
    return mirror_dir(paths) / f"{disk_uuid}.{role}.pid"


def qmp_socket(paths: Paths, disk_uuid: str, role: str) -> Path:
    """The QMP socket of the ``role`` daemon of the disk."""
    return mirror_dir(paths) / f"{disk_uuid}.{role}.qmp"


def _mountpoint_record(paths: Paths, disk_uuid: str) -> Path:
    # Where the FUSE export is mounted: stop removes it even once q-s-d died.
    return mirror_dir(paths) / f"{disk_uuid}.{ROLE_FUSE}.mountpoint"


def _node_tag(export: str) -> str:
    # Readable (the export's start) and unique (a digest of all of it).
    kept = re.sub(r"[^0-9A-Za-z]", "", export)[:_TAG_KEEP]
    return kept + hashlib.sha256(export.encode()).hexdigest()[:_TAG_HASH]


def quorum_name(export: str) -> str:
    """The node name of the quorum of the disk exported as ``export``."""
    return QUORUM_PREFIX + _node_tag(export)


def quorum_blockdev(
    image: Path,
    peer_host: str,
    peer_port: int,
    export: str,
    creds_id: str,
    tls_hostname: str | None = None,
    alone_size: int | None = None,
) -> dict[str, Any]:
    """The QEMU block graph (JSON for --blockdev / -blockdev): quorum
    "mirror-<tag>" over the local file and the peer's NBD export, node names
    derived from ``export`` so two disks never clash; a read is served by the
    local file (fifo), a write completes once both children have it.  The kvm
    hypervisor uses the same graph (with werror=stop on its device).
    ``tls_hostname``: the name the peer's certificate must carry (its node
    name; without it, its address).  ``alone_size``: the peer's copy is
    behind, and a ``null-co`` child of that many bytes takes its place (the
    local copy is written alone, the link is not opened)."""
    tag = _node_tag(export)
    peer: dict[str, Any] = {
        "driver": "nbd",
        "node-name": PEER_PREFIX + tag,
        "server": {"type": "inet", "host": peer_host, "port": str(peer_port)},
        "export": export,
        "tls-creds": creds_id,
    }
    if tls_hostname is not None:
        peer["tls-hostname"] = tls_hostname
    if alone_size is not None:
        peer = {"driver": "null-co", "node-name": NULL_PREFIX + tag, "size": alone_size}
    return {
        "driver": "quorum",
        "node-name": quorum_name(export),
        "vote-threshold": 2,
        "read-pattern": "fifo",
        "children": [
            {
                "driver": "file",
                "node-name": LOCAL_PREFIX + tag,
                "filename": str(image),
                "aio": "threads",
            },
            peer,
        ],
    }


def peer_address(node: Mapping[str, Any]) -> tuple[str, int, str] | None:
    """The host, port and export of a peer's NBD block node as QEMU reports
    it (``query-named-block-nodes``: ``file`` is ``nbd://host:port/export``)."""
    url = urllib.parse.urlsplit(str(node.get("file") or ""))
    if url.scheme != "nbd" or url.hostname is None or url.port is None:
        return None
    return url.hostname, url.port, url.path.lstrip("/")


def _comma_escaped(text: str) -> str:
    # QemuOpts values (--chardev) end at a comma; a doubled one is literal.
    return text.replace(",", ",,")


def _common_argv(paths: Paths, disk_uuid: str, role: str, creds: Path, endpoint: str) -> list[str]:
    creds_object = qemu_tls.object_props(CREDS_ID, str(creds), endpoint)
    socket_path = _comma_escaped(str(qmp_socket(paths, disk_uuid, role)))
    return [
        QSD,
        "--object",
        json.dumps(creds_object),
        "--chardev",
        f"socket,id=qmp0,path={socket_path},server=on,wait=off",
        "--monitor",
        "chardev=qmp0",
        "--pidfile",
        str(pidfile(paths, disk_uuid, role)),
        "--daemonize",
    ]


def _nbd_argv(image: Path, disk_uuid: str, host: str, port: int) -> list[str]:
    blockdev = {"driver": "file", "node-name": "disk", "filename": str(image), "aio": "threads"}
    server = {
        "addr": {"type": "inet", "host": host, "port": str(port)},
        "tls-creds": CREDS_ID,
    }
    export = {
        "type": "nbd",
        "id": "export0",
        "node-name": "disk",
        "name": disk_uuid,
        "writable": True,
    }
    return [
        "--blockdev",
        json.dumps(blockdev),
        "--nbd-server",
        json.dumps(server),
        "--export",
        json.dumps(export),
    ]


def _fuse_argv(
    image: Path,
    disk_uuid: str,
    peer_host: str,
    peer_port: int,
    mountpoint: Path,
    tls_hostname: str | None,
    alone_size: int | None,
) -> list[str]:
    graph = quorum_blockdev(
        image, peer_host, peer_port, disk_uuid, CREDS_ID, tls_hostname, alone_size
    )
    export = {
        "type": "fuse",
        "id": "export0",
        "node-name": graph["node-name"],
        "mountpoint": str(mountpoint),
        "writable": True,
    }
    return ["--blockdev", json.dumps(graph), "--export", json.dumps(export)]


def _lock(paths: Paths, disk_uuid: str, role: str) -> asyncio.Lock:
    return _locks.setdefault((str(paths.root), disk_uuid, role), asyncio.Lock())


def _prepare_dir(paths: Paths) -> Path:
    directory = mirror_dir(paths)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    directory.chmod(0o700)
    return directory


async def _start(
    paths: Paths,
    disk_uuid: str,
    role: str,
    what: str,
    argv: list[str],
    mountpoint: Path | None = None,
) -> int:
    """Start the ``role`` daemon with ``argv`` after the common options
    unless it runs; its pid.  The credentials exist only while it starts; a
    failed start leaves nothing behind (not a mountpoint it made)."""
    endpoint = qemu_tls.ENDPOINT_SERVER if role == ROLE_NBD else qemu_tls.ENDPOINT_CLIENT
    async with _lock(paths, disk_uuid, role):
        pid = running(paths, disk_uuid, role)
        if pid is not None:
            return pid
        directory = await asyncio.to_thread(_prepare_dir, paths)
        await asyncio.to_thread(_remove_files, paths, disk_uuid, role)
        if mountpoint is not None:
            await _unmount(mountpoint)
        made = mountpoint is not None and await asyncio.to_thread(
            _make_mountpoint, paths, disk_uuid, mountpoint
        )
        base = Path(await asyncio.to_thread(tempfile.mkdtemp, None, ".creds-", directory))
        try:
            creds = base / "creds"
            await asyncio.to_thread(qemu_tls.write_creds, paths, creds, endpoint)
            full = [*_common_argv(paths, disk_uuid, role, creds, endpoint), *argv]
            await qemu_process.run_daemonized(what, full, program="qemu-storage-daemon")
            pid = running(paths, disk_uuid, role)
            if pid is None:
                raise errors.OpExecError(f"Failed to start {what}: qemu-storage-daemon is gone")
            return pid
        except BaseException:
            await asyncio.to_thread(_remove_files, paths, disk_uuid, role)
            if mountpoint is not None:
                await asyncio.to_thread(_mountpoint_record(paths, disk_uuid).unlink, True)
                if made:
                    await asyncio.to_thread(mountpoint.unlink, True)
            raise
        finally:
            await asyncio.to_thread(shutil.rmtree, base, True)


async def start_nbd_export(paths: Paths, disk_uuid: str, image: Path, host: str, port: int) -> int:
    """On the secondary: export ``image`` as NBD export named ``disk_uuid`` on
    host:port only, TLS with the node's certificate (endpoint=server,
    verify-peer=on: only a node of the cluster connects).  Idempotent
    (already running for this disk: its pid).  Returns the pid."""
    what = f"the NBD export of disk {disk_uuid}"
    argv = _nbd_argv(image, disk_uuid, host, port)
    return await _start(paths, disk_uuid, ROLE_NBD, what, argv)


def _make_mountpoint(paths: Paths, disk_uuid: str, mountpoint: Path) -> bool:
    """Record the mountpoint, create it if missing; whether it was created."""
    _mountpoint_record(paths, disk_uuid).write_text(str(mountpoint))
    try:
        os.close(os.open(mountpoint, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return False
    return True


def _recorded_mountpoint(paths: Paths, disk_uuid: str) -> Path | None:
    try:
        return Path(_mountpoint_record(paths, disk_uuid).read_text())
    except FileNotFoundError:
        return None


async def start_fuse_export(
    paths: Paths,
    disk_uuid: str,
    image: Path,
    peer_host: str,
    peer_port: int,
    mountpoint: Path,
    tls_hostname: str | None = None,
    alone_size: int | None = None,
) -> int:
    """On the primary: the quorum over ``image`` and the peer's export (or,
    with ``alone_size``, a stand-in: see :func:`quorum_blockdev`), exported by
    FUSE at ``mountpoint`` (created as an empty regular file 0600 if
    missing).  Idempotent.  Returns the pid."""
    what = f"the FUSE export of disk {disk_uuid}"
    argv = _fuse_argv(image, disk_uuid, peer_host, peer_port, mountpoint, tls_hostname, alone_size)
    return await _start(paths, disk_uuid, ROLE_FUSE, what, argv, mountpoint)


def _alive(pid: int) -> bool:
    """Whether ``pid`` still holds its resources (a zombie has released its
    mounts and locks: gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


def running(paths: Paths, disk_uuid: str, role: str) -> int | None:
    """The pid if that daemon is alive (pidfile + /proc/<pid>/cmdline names
    qemu-storage-daemon and this pidfile: a reused pid is not taken for it)."""
    path = pidfile(paths, disk_uuid, role)
    pid = qemu_process.read_pid(str(path))
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\0")
    except (FileNotFoundError, ProcessLookupError):
        return None
    if not argv or os.path.basename(argv[0]) != b"qemu-storage-daemon":
        return None
    if os.fsencode(str(path)) not in argv or not _alive(pid):
        return None
    return pid


async def _wait_gone(pid: int, bound: float) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound
    while _alive(pid):
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(_POLL)
    return True


def _remove_files(paths: Paths, disk_uuid: str, role: str) -> None:
    for path in (pidfile(paths, disk_uuid, role), qmp_socket(paths, disk_uuid, role)):
        path.unlink(missing_ok=True)


def _mounted(mountpoint: Path) -> bool:
    # mountinfo escapes these characters as octal (\040 for a space).
    escaped = str(mountpoint)
    for char in "\\ \t\n":
        escaped = escaped.replace(char, f"\\{ord(char):03o}")
    with open("/proc/self/mountinfo") as mounts:
        return any(line.split()[4] == escaped for line in mounts)


async def _unmount(mountpoint: Path) -> None:
    """Detach a FUSE mount a killed q-s-d left behind (not connected: the
    file can be neither used nor removed until then)."""
    if await asyncio.to_thread(_mounted, mountpoint):
        code, out = await qemu_process.output(["umount", "--lazy", str(mountpoint)])
        if code != 0:
            raise errors.OpExecError(f"Cannot unmount the stale FUSE export {mountpoint}: {out}")


async def stop(paths: Paths, disk_uuid: str, role: str) -> None:
    """Stop that daemon (SIGTERM; wait until the process is gone, so the FUSE
    mount is gone and the image's lock released; SIGKILL after a bound, then
    still wait); gone already is fine; remove its pidfile, QMP socket (and
    for fuse, the mountpoint file)."""
    if role not in ROLES:
        raise errors.ProgrammerError(f"Unknown mirror daemon role {role!r}")
    async with _lock(paths, disk_uuid, role):
        pid = running(paths, disk_uuid, role)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            if not await _wait_gone(pid, _TERM_WAIT):
                qemu_process.kill(pid)
                if not await _wait_gone(pid, _KILL_WAIT):
                    raise errors.OpExecError(
                        f"The {role} daemon of disk {disk_uuid} (pid {pid}) does not exit"
                    )
        mountpoint = _recorded_mountpoint(paths, disk_uuid) if role == ROLE_FUSE else None
        if mountpoint is not None:
            await _unmount(mountpoint)
            await asyncio.to_thread(mountpoint.unlink, True)
            await asyncio.to_thread(_mountpoint_record(paths, disk_uuid).unlink, True)
        await asyncio.to_thread(_remove_files, paths, disk_uuid, role)


async def probe(host: str, port: int, timeout: float) -> bool:
    """Whether an NBD server answers at host:port: it sends its 8-byte
    "NBDMAGIC" greeting (before any TLS) within ``timeout``.  A stopped
    q-s-d or a partition: False.  The watchdog's liveness check of a peer."""
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port)
            return await reader.readexactly(len(NBD_MAGIC)) == NBD_MAGIC
    except (OSError, TimeoutError, asyncio.IncompleteReadError):
        return False
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
