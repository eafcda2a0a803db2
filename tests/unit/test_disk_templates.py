"""The disk template table and its node-side contract (issue 10, item 3): one
table on each side, holding the same templates; no template name spelled
outside it; typed disk descriptions; each node-side class creating, growing,
renaming, verifying, streaming and removing disks, and refusing what lies
outside what it may touch."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import get_args

import pytest

from corral import errors
from corral.node.storage import registry
from corral.node.storage.base import CHUNK
from corral.node.storage.blockdev import BlockDevTemplate
from corral.node.storage.file import FileTemplate, SharedFileTemplate
from corral.paths import Paths
from corral.storage import names, templates
from corral.storage.disk import DiskDescription
from tests.helpers.source_literals import CORRAL, spelled_outside

MIB = 1024 * 1024
# Where a template name may be spelled: the names module, and the table's
# Literal type (mypy needs literals there; a test below checks it).
TABLE = {CORRAL / "storage" / "names.py", CORRAL / "storage" / "templates.py"}
# Same spelling, other namespaces: Ganeti's storage types (ST_FILE is "file"...),
# the "drbd" data collector and the "file" end of an import/export stream.
OTHER_NAMESPACES = {
    CORRAL / "impexp_kinds.py",
    CORRAL / "cmdlib" / "node_storage.py",
    CORRAL / "cli" / "gnt_node.py",
    CORRAL / "opcodes" / "node.py",
    CORRAL / "cli" / "cluster_opts.py",
}
# Ganeti's default RBD pool is called "rbd" too.
OTHER_USES = {(CORRAL / "params.py", "rbd")}


def test_no_template_name_is_spelled_outside_the_table() -> None:
    allowed = TABLE | OTHER_NAMESPACES
    assert spelled_outside(names.GANETI_DISK_TEMPLATES, allowed, OTHER_USES) == []


def test_the_tables_agree() -> None:
    assert get_args(templates.DiskTemplateName) == names.GANETI_DISK_TEMPLATES
    assert set(registry.NODE_TEMPLATES) == set(templates.DISK_TEMPLATES)
    assert set(templates.DISK_TEMPLATES) <= set(names.GANETI_DISK_TEMPLATES)
    # Ganeti's DTS_EXT_MIRROR, DTS_GROWABLE and DTS_MUST_ADOPT, for what Corral has.
    table = templates.DISK_TEMPLATES
    assert {n for n, t in table.items() if t.shared} == {"diskless", "sharedfile", "blockdev"}
    assert {n for n, t in table.items() if t.growable} == {"file", "sharedfile"}
    assert {n for n, t in table.items() if t.adopts} == {"blockdev"}


def test_logical_ids_have_each_templates_shape() -> None:
    dirs = templates.StorageDirs("/srv/files", "/srv/shared")
    file_id = templates.get("file").logical_id(dirs, "inst1", 0, {"driver": None})
    assert file_id[0] == "loop" and file_id[1].startswith("/srv/files/inst1/")
    assert file_id[1].endswith(".file.disk0")
    shared_id = templates.get("sharedfile").logical_id(dirs, "inst1", 2, {"driver": "blktap"})
    assert shared_id[0] == "blktap" and shared_id[1].startswith("/srv/shared/inst1/")
    adopted = templates.get("blockdev").logical_id(dirs, "i", 0, {"adopt": "/dev/disk/by-id/x/"})
    assert adopted == ["manual", "/dev/disk/by-id/x"]


def test_descriptions_round_trip_and_refuse_bad_shapes() -> None:
    disk = DiskDescription("file", ("loop", "/srv/x/d0"), 8, "uuid-1", "disk/0", "data")
    assert DiskDescription.from_wire(disk.to_wire()) == disk
    for bad in (
        "/srv/x/d0",
        {**disk.to_wire(), "size": True},
        {**disk.to_wire(), "size": -1},
        {**disk.to_wire(), "logical_id": "/srv/x/d0"},
        {**disk.to_wire(), "logical_id": ["loop", 7]},
        {**disk.to_wire(), "extra": 1},
        {k: v for k, v in disk.to_wire().items() if k != "uuid"},
    ):
        with pytest.raises(errors.OpExecError, match="Invalid disk description"):
            DiskDescription.from_wire(bad)


@pytest.mark.skipif(os.path.exists("/dev/mapper/control"), reason="device-mapper present")
def test_plain_names_the_missing_device_mapper() -> None:
    with pytest.raises(errors.OpPrereqError, match="this machine has no device-mapper"):
        templates.check_implemented("plain", "enable")


@pytest.mark.skipif(os.path.exists("/proc/drbd"), reason="DRBD present")
def test_drbd_names_the_missing_drbd() -> None:
    with pytest.raises(errors.OpPrereqError, match=r"Cannot use disk template 'drbd': .* DRBD"):
        templates.check_implemented("drbd")


# The node side, on a node root in tmp_path.


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    paths = Paths(tmp_path / "root")
    paths.file_storage_dir.mkdir(parents=True)
    paths.shared_file_storage_dir.mkdir(parents=True)
    return paths


def file_disk(name: str, size: int = 4, template: str = "file") -> DiskDescription:
    top = "/srv/ganeti/file-storage" if template == "file" else "/srv/ganeti/shared-file-storage"
    return DiskDescription(template, ("loop", f"{top}/inst1/{name}"), size, name)


def test_a_file_disk_through_its_life(paths: Paths) -> None:
    node = FileTemplate(paths)
    disk = file_disk("d0")
    node.create(disk)
    local = node.attach(disk)
    assert local == paths.file_storage_dir / "inst1" / "d0"
    assert node.size(disk) == 4 * MIB and node.verify(disk) is None
    node.grow(disk, 6)
    assert local.stat().st_size == 6 * MIB
    assert "has 6 MiB, not 8 MiB" in str(node.verify(file_disk("d0", 8)))
    with pytest.raises(errors.OpExecError, match="already exists"):
        node.create(disk)
    moved = ("loop", "/srv/ganeti/file-storage/inst2/d0")
    node.rename(disk, moved)
    assert not local.parent.exists() and (paths.file_storage_dir / "inst2" / "d0").exists()
    renamed = disk.with_logical_id(moved)
    node.remove(renamed)
    assert not (paths.file_storage_dir / "inst2").exists()
    assert "Cannot open disk" in str(node.verify(renamed))


def test_each_file_template_keeps_to_its_directory(paths: Paths) -> None:
    shared = file_disk("d0", template="sharedfile")
    SharedFileTemplate(paths).create(shared)
    assert (paths.shared_file_storage_dir / "inst1" / "d0").exists()
    with pytest.raises(errors.OpExecError, match="outside the file storage directory"):
        FileTemplate(paths).attach(DiskDescription("file", shared.logical_id, 4, "x"))
    with pytest.raises(errors.OpExecError, match="outside the file storage directory"):
        SharedFileTemplate(paths).attach(file_disk("d1").with_logical_id(("loop", "/etc/x")))
    with pytest.raises(errors.OpExecError, match="expected \\[driver, path\\]"):
        FileTemplate(paths).attach(file_disk("d1").with_logical_id(("manual", "/srv/x")))
    with pytest.raises(errors.OpExecError, match="not served by this node"):
        registry.resolve(paths, {**shared.to_wire(), "template": "plain"})


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def test_copy_streams_carry_the_content_and_keep_files_sparse(paths: Paths) -> None:
    node = FileTemplate(paths)
    source, target = file_disk("src", 12), file_disk("dst", 12)
    node.create(source)
    node.create(target)
    with node.attach(source).open("r+b") as handle:
        handle.write(b"head")
        handle.seek(CHUNK * 2 + 5)
        handle.write(b"tail")
    written = await node.write_stream(target, node.read_stream(source))
    assert written == 12 * MIB
    assert node.attach(target).read_bytes() == node.attach(source).read_bytes()
    # The all-zero chunk in the middle was not written: the copy stays sparse.
    assert node.attach(target).stat().st_blocks * 512 <= 2 * CHUNK
    with pytest.raises(errors.OpExecError, match="larger than disk"):
        await node.write_stream(target, _chunks(b"x" * (13 * MIB)))


def test_blockdev_names_are_checked_before_any_device_is_touched(paths: Paths) -> None:
    node = BlockDevTemplate(paths)
    regular = paths.root / "not-a-device"
    regular.write_bytes(b"x")
    link = paths.from_wire("/dev/disk/by-id/regular")
    link.parent.mkdir(parents=True)
    link.symlink_to(regular)
    cases = {
        ("manual", "/dev/disk/../sda"): "lies outside /dev/disk/",
        ("manual", "/dev/sda"): "lies outside /dev/disk/",
        ("loop", "/dev/disk/by-id/regular"): "expected [manual, device]",
        ("manual", "/dev/disk/by-id/regular"): "which lies outside /dev",
        ("manual", "/dev/disk/by-id/absent"): "Missing block device",
    }
    for logical_id, text in cases.items():
        disk = DiskDescription("blockdev", logical_id, 1, "u")
        with pytest.raises(errors.OpExecError) as err:
            node.attach(disk)
        assert text in err.value.message
    with pytest.raises(errors.OpExecError, match="cannot grow"):
        node.grow(DiskDescription("blockdev", ("manual", "/dev/disk/by-id/regular"), 1, "u"), 2)
    # Removing releases the device, which is never touched; a bad name is refused.
    node.remove(DiskDescription("blockdev", ("manual", "/dev/disk/by-id/regular"), 1, "u"))
    assert regular.read_bytes() == b"x"
    with pytest.raises(errors.OpExecError, match="outside /dev/disk/"):
        node.remove(DiskDescription("blockdev", ("manual", "/etc/passwd"), 1, "u"))
