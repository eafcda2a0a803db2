"""Personalization packages: a ``.tar.gz`` fetched with basic auth and
unpacked over the filesystem of an instance's disk 0.

The disk is mounted on the node through a loop device (the filesystem of the
disk itself, else of its first partition: MBR or GPT, read here because the
node may have no udev to make partition devices), ``nosuid,nodev,noexec``.
The archive is unpacked with tarfile's ``data`` filter (no absolute paths, no
``..``, no links leading out of the filesystem, no devices, no set-id bits),
checked against the mounted tree itself (an absolute symlink of the guest
leads out too); owners are kept as numbers (they are the guest's, not the
node's).  The archive lives in a 0600 file of the node's spool directory for
the time of the unpacking only.
"""

from __future__ import annotations

import os
import struct
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO

from corral import errors
from corral.node.osmedia import fetch
from corral.osdef.media import PackageSource

GZIP_MAGIC = b"\x1f\x8b"
LIMIT = 1 << 30  # bytes a package may have
SECTOR = 512
EXT_MAGIC_OFFSET, EXT_MAGIC = 1080, b"\x53\xef"
MBR_EXTENDED = {0x05, 0x0F, 0x85}
MBR_GPT = 0xEE
MOUNT_OPTIONS = "nosuid,nodev,noexec"


def credentials(source: PackageSource) -> fetch.Credentials | None:
    """The basic-auth credentials of ``source`` (None: none given)."""
    if source.user is None or source.password is None:
        return None
    return fetch.Credentials(source.user, source.password)


def probe(source: PackageSource) -> None:
    """OpExecError unless the package can be fetched and starts as a gzip file."""
    head = fetch.head(source.url, credentials(source), len(GZIP_MAGIC))
    if head != GZIP_MAGIC:
        raise _not_targz(source.url, "it is not gzip-compressed")


def _not_targz(url: str, why: str) -> errors.OpExecError:
    return errors.OpExecError(
        f"The personalization package {url} is not a tar.gz archive ({why}); make it with tar -czf"
    )


def overlay(source: PackageSource, disk: Path, spool: Path) -> dict[str, int]:
    """Fetch the package and unpack it over ``disk``'s filesystem; how many
    members and bytes it had.  The downloaded archive is removed whatever happens."""
    spool.mkdir(mode=0o700, parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=spool, prefix="package-", suffix=".tar.gz") as tmp:
        fetch.download(source.url, credentials(source), tmp, LIMIT)
        tmp.flush()
        tmp.seek(0)
        with _archive(source.url, tmp) as tar, _mounted(disk, spool) as root:
            members = tar.getmembers()
            try:
                tar.extractall(root, filter=_keep_owners)
            except (tarfile.FilterError, OSError) as err:
                raise errors.OpExecError(
                    f"The personalization package {source.url} cannot be unpacked safely: {err}"
                ) from None
    return {"members": len(members), "bytes": sum(m.size for m in members if m.isfile())}


@contextmanager
def _archive(url: str, stream: IO[bytes]) -> Iterator[tarfile.TarFile]:
    if stream.read(len(GZIP_MAGIC)) != GZIP_MAGIC:
        raise _not_targz(url, "it is not gzip-compressed")
    stream.seek(0)
    try:
        tar = tarfile.open(fileobj=stream, mode="r:gz")  # noqa: SIM115  (closed below)
        tar.getmembers()
    except (tarfile.TarError, EOFError, OSError) as err:
        raise _not_targz(url, str(err) or type(err).__name__) from None
    with tar:
        yield tar


def _keep_owners(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    """tarfile's ``data`` filter, the numeric owners kept (the guest's)."""
    safe = tarfile.data_filter(member, dest)
    return safe.replace(uid=member.uid, gid=member.gid, uname="", gname="", deep=False)


def filesystem_extent(disk: Path) -> tuple[int, int | None]:
    """Where the filesystem to mount is on ``disk``: (offset, size or None
    for the rest): the disk itself when it holds an ext filesystem or no
    partition table, else its first partition."""
    with open(disk, "rb") as f:
        head = f.read(2 * SECTOR + 2048)
    if head[EXT_MAGIC_OFFSET : EXT_MAGIC_OFFSET + 2] == EXT_MAGIC or head[510:512] != b"\x55\xaa":
        return 0, None
    for index in range(4):
        entry = head[446 + 16 * index : 446 + 16 * (index + 1)]
        kind = entry[4]
        start, sectors = struct.unpack_from("<II", entry, 8)
        if kind == MBR_GPT:
            return _gpt_first(disk)
        if kind and kind not in MBR_EXTENDED and sectors:
            return start * SECTOR, sectors * SECTOR
    return 0, None


def _gpt_first(disk: Path) -> tuple[int, int | None]:
    with open(disk, "rb") as f:
        f.seek(SECTOR)
        header = f.read(92)
        if header[:8] != b"EFI PART":
            raise errors.OpExecError(f"{disk}: a protective MBR without a GPT header")
        entries_lba, count, size = struct.unpack_from("<QII", header, 72)
        f.seek(entries_lba * SECTOR)
        table = f.read(count * size)
    for index in range(count):
        entry = table[index * size : (index + 1) * size]
        if entry[:16] != bytes(16):
            first, last = struct.unpack_from("<QQ", entry, 32)
            return first * SECTOR, (last - first + 1) * SECTOR
    raise errors.OpExecError(f"{disk}: the GPT has no partition")


@contextmanager
def _mounted(disk: Path, spool: Path) -> Iterator[str]:
    """``disk``'s filesystem mounted in a fresh directory of ``spool``."""
    offset, size = filesystem_extent(disk)
    setup = ["losetup", "--find", "--show", "--offset", str(offset)]
    if size is not None:
        setup += ["--sizelimit", str(size)]
    with ExitStack() as stack:
        device = _run([*setup, str(disk)], "attach the disk to a loop device").strip()
        stack.callback(_run, ["losetup", "--detach", device], "detach the loop device")
        where = stack.enter_context(tempfile.TemporaryDirectory(dir=spool, prefix="mnt-"))
        _run(["mount", "-o", MOUNT_OPTIONS, device, where], "mount the disk's filesystem")
        stack.callback(_run, ["umount", where], "unmount the disk's filesystem")
        yield os.path.realpath(where)


def _run(cmd: list[str], what: str) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise errors.OpExecError(
            f"Could not {what} to unpack the personalization package: "
            f"{done.stderr.strip() or done.stdout.strip()} (the package needs a filesystem"
            " the node can mount: on the disk itself or its first partition)"
        )
    return done.stdout
