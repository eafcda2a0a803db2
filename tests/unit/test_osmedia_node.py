"""The node's reading of OS media, byte by byte: image formats (qcow2's
header, refused formats) and where a disk's filesystem starts (MBR, GPT)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from corral import errors
from corral.node.osmedia import image, package

MIB = 1 << 20


def qcow2_header(
    size: int, *, version: int = 3, backing: int = 0, crypt: int = 0, incompatible: int = 0
) -> bytes:
    head = bytearray(image.HEAD)
    head[:4] = image.QCOW2_MAGIC
    struct.pack_into(">IQ", head, 4, version, backing)
    struct.pack_into(">Q", head, 24, size)
    struct.pack_into(">I", head, 32, crypt)
    struct.pack_into(">Q", head, 72, incompatible)
    return bytes(head)


def test_a_qcow2_header_gives_the_virtual_size() -> None:
    assert image.sniff(qcow2_header(5 * MIB), "x") == image.ImageInfo("qcow2", 5 * MIB)


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"backing": 512}, "has a backing file"),
        ({"crypt": 1}, "is encrypted"),
        ({"incompatible": image.QCOW2_EXTERNAL_DATA}, "keeps its data in an external file"),
        ({"version": 4}, "is of qcow2 version 4"),
    ],
)
def test_a_qcow2_that_would_read_elsewhere_is_refused(fields: dict[str, int], why: str) -> None:
    with pytest.raises(errors.OpExecError, match=why):
        image.sniff(qcow2_header(MIB, **fields), "img")


@pytest.mark.parametrize(("magic", "name"), [(b"KDMV", "vmdk"), (b"\x1f\x8b\x08", "gzip")])
def test_other_formats_are_refused_by_name(magic: bytes, name: str) -> None:
    with pytest.raises(errors.OpExecError, match=f"Unknown image format: img is a {name} file"):
        image.sniff(magic + bytes(600), "img")


def test_anything_else_is_raw() -> None:
    assert image.sniff(b"\xeb\x63\x90" + bytes(600), "img") is None


def disk_with(tmp_path: Path, writes: dict[int, bytes]) -> Path:
    path = tmp_path / "disk"
    with path.open("wb") as f:
        f.truncate(4 * MIB)
        for offset, data in writes.items():
            f.seek(offset)
            f.write(data)
    return path


def mbr(kind: int, start: int, sectors: int) -> bytes:
    return bytes([0, 0, 0, 0, kind, 0, 0, 0]) + struct.pack("<II", start, sectors)


def test_the_first_mbr_partition_is_mounted(tmp_path: Path) -> None:
    entries = mbr(0x05, 100, 10) + mbr(0x83, 2048, 4096)
    disk = disk_with(tmp_path, {446: entries, 510: b"\x55\xaa"})
    assert package.filesystem_extent(disk) == (2048 * 512, 4096 * 512)


def test_the_first_gpt_partition_is_mounted(tmp_path: Path) -> None:
    header = b"EFI PART" + bytes(64) + struct.pack("<QII", 2, 128, 128)
    entry = b"\x01" * 16 + bytes(16) + struct.pack("<QQ", 2048, 4095)
    disk = disk_with(
        tmp_path, {446: mbr(0xEE, 1, 8191), 510: b"\x55\xaa", 512: header, 1024: entry}
    )
    assert package.filesystem_extent(disk) == (2048 * 512, 2048 * 512)


def test_a_whole_disk_filesystem_is_mounted_as_it_is(tmp_path: Path) -> None:
    disk = disk_with(tmp_path, {1080: b"\x53\xef"})
    assert package.filesystem_extent(disk) == (0, None)
