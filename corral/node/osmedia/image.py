"""OS images: what an image is (format, size) and writing it onto a disk.

Formats: raw, and qcow2 converted by ``qemu-img`` (Debian's qemu-utils; a
qcow2 with a backing file, an external data file or encryption is refused:
those would make qemu-img read other files of the node, or need keys).  Other
known formats (vmdk, vdi, vhd, compressed files...) are refused by name.

Writing is sparse-aware: the disk is emptied first (a regular file is cut to
nothing and back to its size: all holes; a block device gets the image's
zero ranges zeroed with BLKZEROOUT), then only the image's data is written,
so holes stay holes.  The size is checked against the disk before anything
is written.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import stat
import struct
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from corral import errors
from corral.node.osmedia import fetch
from corral.osdef.media import is_url

RAW, QCOW2 = "raw", "qcow2"
HEAD = 4096  # bytes read to tell the format
CHUNK = 1 << 20
BLOCK = 64 << 10  # the smallest zero range left as a hole
_ZEROS, _ZEROS_BLOCK = bytes(CHUNK), bytes(BLOCK)
BLKZEROOUT = 0x127F
# Magic (at offset) of formats that are not raw disks and that Corral does not convert.
FOREIGN: tuple[tuple[int, bytes, str], ...] = (
    (0, b"KDMV", "vmdk"),
    (0, b"# Disk DescriptorFile", "vmdk"),
    (0, b"conectix", "vhd"),
    (0, b"vhdxfile", "vhdx"),
    (0, b"QED\0", "qed"),
    (64, b"\x7f\x10\xda\xbe", "vdi"),
    (0, b"\x1f\x8b", "gzip"),
    (0, b"\xfd7zXZ\0", "xz"),
    (0, b"BZh", "bzip2"),
    (0, b"\x28\xb5\x2f\xfd", "zstd"),
)
QCOW2_MAGIC = b"QFI\xfb"
# qcow2 v3 incompatible feature bit: the data lives in another (named) file.
QCOW2_EXTERNAL_DATA = 1 << 2
_QEMU_PROGRESS = re.compile(rb"\((\d+(?:\.\d+)?)/100%\)")


@dataclass(frozen=True)
class ImageInfo:
    """An image's format and the bytes it fills on a disk (qcow2: its virtual size)."""

    format: str
    size: int


@dataclass
class Progress:
    """How far a write is: bytes of the image done out of ``total`` (shared
    with the thread writing; read by the progress call)."""

    total: int = 0
    done: int = 0
    written: int = 0  # data bytes actually written (the rest stayed holes)


def sniff(head: bytes, image: str) -> ImageInfo | None:
    """The format told by an image's first bytes (size None for raw: the
    caller knows it); OpExecError for a format Corral does not write."""
    if head.startswith(QCOW2_MAGIC):
        return ImageInfo(QCOW2, _qcow2_size(head, image))
    for offset, magic, name in FOREIGN:
        if head[offset : offset + len(magic)] == magic:
            raise errors.OpExecError(
                f"Unknown image format: {image} is a {name} file, not a raw or qcow2 disk"
                " image; convert it (qemu-img convert -O qcow2)"
            )
    return None


def _qcow2_size(head: bytes, image: str) -> int:
    if len(head) < 104:
        raise errors.OpExecError(f"{image}: truncated qcow2 header")
    version, backing_offset = struct.unpack_from(">IQ", head, 4)
    (size,) = struct.unpack_from(">Q", head, 24)
    (crypt,) = struct.unpack_from(">I", head, 32)
    incompatible = struct.unpack_from(">Q", head, 72)[0] if version >= 3 else 0
    refused = (
        (backing_offset != 0, "has a backing file"),
        (crypt != 0, "is encrypted"),
        (incompatible & QCOW2_EXTERNAL_DATA != 0, "keeps its data in an external file"),
        (version not in (2, 3), f"is of qcow2 version {version}"),
    )
    for bad, why in refused:
        if bad:
            raise errors.OpExecError(
                f"{image} {why}; only self-contained qcow2 images (version 2 or 3) are written"
            )
    return int(size)


def probe(image: str) -> ImageInfo:
    """The format and size of ``image`` (a path on this node or a URL)."""
    if is_url(image):
        with fetch.get(image, first_bytes=HEAD) as answer:
            head = fetch.read_exactly(answer.body, HEAD)
            length = answer.length
        info = sniff(head, image)
        if info is not None:
            return info
        if length is None:
            raise errors.OpExecError(
                f"{image}: the server does not tell the image's size (no Content-Length);"
                " serve it with one, or copy the image to the node and give its path"
            )
        return ImageInfo(RAW, length)
    with _open_source(image) as (src, size):
        return sniff(src.read(HEAD), image) or ImageInfo(RAW, size)


@contextmanager
def _open_source(path: str) -> Iterator[tuple[BinaryIO, int]]:
    try:
        src = open(path, "rb")  # noqa: SIM115  (closed below)
    except OSError as err:
        raise errors.OpExecError(f"Image '{path}' not found: {err.strerror}") from None
    with src:
        mode = os.fstat(src.fileno()).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISBLK(mode)):
            raise errors.OpExecError(f"Image '{path}' is not a file or a block device")
        size = src.seek(0, os.SEEK_END)
        src.seek(0)
        yield src, size


def check_fits(image: str, info: ImageInfo, disk_bytes: int) -> None:
    """OpExecError if the image does not fit on a disk of ``disk_bytes``."""
    if info.size > disk_bytes:
        raise errors.OpExecError(
            f"Image size is bigger than device size: {image} needs {_mib(info.size)}"
            f" and the disk has {_mib(disk_bytes)}; give a larger disk (or grow it)"
        )


def _mib(size: int) -> str:
    return f"{-(-size // (1 << 20))} MiB"


def write(image: str, target: Path, disk_bytes: int, progress: Progress, spool: Path) -> None:
    """Write ``image`` onto the disk at ``target`` (``disk_bytes`` long); its
    size is checked before anything is written.  A qcow2 URL is downloaded
    into ``spool`` first (and removed), qemu-img needing a file."""
    info = probe(image)
    check_fits(image, info, disk_bytes)
    progress.total = info.size
    # The source is opened (a qcow2 URL downloaded) before the disk is emptied.
    if info.format == QCOW2:
        with _local_file(image, info, spool, progress) as path, _open_target(target):
            _convert_qcow2(path, target, progress)
    elif is_url(image):
        with fetch.get(image) as answer, _open_target(target) as disk:
            _copy_stream(answer.body, info.size, disk, progress)
    else:
        with _open_source(image) as (src, size), _open_target(target) as disk:
            _copy_stream(src, size, disk, progress, _data_ranges(src.fileno(), size))


class _Disk:
    """The target disk, emptied: data is written, zero ranges stay (or are made) zero."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.regular = stat.S_ISREG(os.fstat(fd).st_mode)
        if self.regular:
            size = os.fstat(fd).st_size
            os.ftruncate(fd, 0)
            os.ftruncate(fd, size)

    def data(self, offset: int, data: memoryview) -> None:
        os.pwrite(self.fd, data, offset)

    def zero(self, offset: int, length: int) -> None:
        if not self.regular and length:
            fcntl.ioctl(self.fd, BLKZEROOUT, struct.pack("QQ", offset, length))


@contextmanager
def _open_target(target: Path) -> Iterator[_Disk]:
    fd = os.open(target, os.O_WRONLY | os.O_CLOEXEC)
    try:
        yield _Disk(fd)
        os.fsync(fd)
    finally:
        os.close(fd)


def _data_ranges(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """The (start, end) ranges of a file that may hold data (SEEK_DATA/SEEK_HOLE;
    all of it where the file system cannot tell)."""
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
            end = os.lseek(fd, start, os.SEEK_HOLE)
        except OSError as err:
            if err.errno == 6:  # ENXIO: no data after offset
                return
            yield offset, size
            return
        yield start, min(end, size)
        offset = end


def _copy_stream(
    src: BinaryIO,
    size: int,
    disk: _Disk,
    progress: Progress,
    ranges: Iterator[tuple[int, int]] | None = None,
) -> None:
    """Copy ``size`` bytes of ``src`` onto ``disk``, zero blocks left as holes;
    only ``ranges`` of ``src`` are read when given (a seekable file)."""
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    position = 0
    for start, end in ranges if ranges is not None else iter([(0, size)]):
        disk.zero(position, start - position)
        if ranges is not None:
            src.seek(start)
        position = start
        while position < end:
            got = _fill(src, view[: min(CHUNK, end - position)])
            if not got:
                raise errors.OpExecError(f"The image ended after {position} of {size} bytes")
            progress.written += _write_nonzero(disk, position, buf, got)
            position += got
            progress.done = position
    disk.zero(position, size - position)
    progress.done = size


def _fill(src: BinaryIO, view: memoryview) -> int:
    """Read into ``view`` until it is full or ``src`` ends (a socket gives
    less at a time); the bytes read."""
    total = 0
    while total < len(view):
        got = src.readinto(view[total:])  # type: ignore[attr-defined]
        if not got:
            break
        total += got
    return total


def _write_nonzero(disk: _Disk, offset: int, buf: bytearray, length: int) -> int:
    """Write the BLOCKs of ``buf[:length]`` that hold data (each run in one
    write), zero the others; the bytes written.  A bytearray compared with
    bytes is a memcmp (a memoryview's comparison is not)."""
    if length == CHUNK and buf == _ZEROS:
        disk.zero(offset, length)
        return 0
    runs: list[list[int]] = []
    for start in range(0, length, BLOCK):
        end = min(start + BLOCK, length)
        if buf[start:end] == (_ZEROS_BLOCK if end - start == BLOCK else bytes(end - start)):
            continue
        if runs and runs[-1][1] == start:
            runs[-1][1] = end
        else:
            runs.append([start, end])
    view, done = memoryview(buf), 0
    for start, end in runs:
        disk.zero(offset + done, start - done)
        disk.data(offset + start, view[start:end])
        done = end
    disk.zero(offset + done, length - done)
    return sum(end - start for start, end in runs)


@contextmanager
def _local_file(image: str, info: ImageInfo, spool: Path, progress: Progress) -> Iterator[str]:
    """``image`` as a local path: itself, or a URL downloaded into ``spool``
    (removed afterwards, whatever happens)."""
    if not is_url(image):
        yield image
        return
    spool.mkdir(mode=0o700, parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=spool, prefix="image-", suffix=".qcow2") as tmp:
        # A qcow2 file holds its virtual size at most, plus metadata.
        limit = 2 * info.size + (64 << 20)
        fetch.download(image, None, tmp, limit, lambda done: setattr(progress, "done", done // 2))
        tmp.flush()
        yield tmp.name


def _convert_qcow2(path: str, target: Path, progress: Progress) -> None:
    qemu_img = shutil.which("qemu-img")
    if qemu_img is None:
        raise errors.OpExecError(
            "qcow2 images need qemu-img on the node (Debian package qemu-utils);"
            " install it or give a raw image"
        )
    cmd = [qemu_img, "convert", "-p", "-n", "-f", QCOW2, "-O", RAW, path, str(target)]
    base = progress.done
    env = {"LC_ALL": "C", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        while line := os.read(proc.stdout.fileno(), 256):
            for match in _QEMU_PROGRESS.finditer(line):
                share = float(match.group(1)) / 100
                progress.done = base + int((progress.total - base) * share)
        error = proc.stderr.read().decode(errors="replace").strip()
    if proc.returncode != 0:
        raise errors.OpExecError(f"qemu-img could not convert the qcow2 image: {error}")
    progress.done = progress.total
