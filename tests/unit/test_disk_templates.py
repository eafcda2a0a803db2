"""The disk template table and its node-side contract (issue 10, item 3;
issue 21, item 3): one table on each side, holding the same templates; no
template name spelled outside it; each template a strategy (mirroring, moves,
capacity unit, what its disks hold); Ganeti's disk tree (nodes, children)
and its loading from older configurations; typed disk descriptions; each
node-side class creating, growing, renaming, verifying, streaming,
assembling and removing disks, and refusing what lies outside what it may touch."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, get_args

import pytest

from corral import constants as C
from corral import errors
from corral import storage_names as names
from corral.config.manager import ConfigManager
from corral.disk_description import DiskDescription
from corral.node.storage import registry
from corral.node.storage.base import CHUNK, Capacity, SyncStatus
from corral.node.storage.blockdev import BlockDevTemplate
from corral.node.storage.file import FileTemplate, SharedFileTemplate
from corral.objects import Cluster, Disk, Instance
from corral.paths import Paths
from corral.state.ports import ConfigSnapshot
from corral.state.sqlite.config import SqliteConfigStore
from corral.storage import ports, reservations, templates
from corral.storage.reservations import JobLedger, Reservations
from corral.storage.strategy import Mirroring, Placement, Resource
from corral.storage.units import StorageUnit
from tests.helpers.source_literals import CORRAL, compared_outside, spelled_outside

MIB = 1024 * 1024
# Where a template name may be spelled: the names module, and the table's
# Literal type (mypy needs literals there; a test below checks it).
TABLE = {CORRAL / "storage_names.py", CORRAL / "storage" / "templates.py"}
# Same spelling, other namespaces: the "drbd" data collector, the "file" end
# of an import/export stream, Ganeti's storage types on the command line.
OTHER_NAMESPACES = {
    CORRAL / "impexp_kinds.py",
    CORRAL / "node" / "storage" / "qsd.py",  # QEMU's "file" block driver
    CORRAL / "cli" / "gnt_node.py",
    CORRAL / "opcodes" / "node.py",
    CORRAL / "cli" / "cluster_opts.py",
}
# Ganeti's default RBD pool is called "rbd" too.
OTHER_USES = {(CORRAL / "diskparams.py", "rbd")}


def test_no_template_name_is_spelled_outside_the_table() -> None:
    allowed = TABLE | OTHER_NAMESPACES
    assert spelled_outside(names.DISK_TEMPLATE_NAMES, allowed, OTHER_USES) == []


def test_no_behaviour_is_chosen_by_template_name() -> None:
    # What sets a template apart is its strategy's to say; only the command
    # line (which imports no strategy, to start fast) and the instance policy
    # (Ganeti's checks of the allowed names) compare names.
    by_name = TABLE | {CORRAL / "cli" / "instance_specs.py", CORRAL / "ipolicy.py"}
    constants = [name for name in vars(names) if name.startswith("DT_")]
    assert len(constants) == len(names.DISK_TEMPLATE_NAMES)
    assert compared_outside(constants, by_name) == []


def test_the_tables_agree() -> None:
    assert get_args(templates.DiskTemplateName) == names.DISK_TEMPLATE_NAMES
    assert set(registry.NODE_TEMPLATES) == set(templates.DISK_TEMPLATES)
    assert set(templates.DISK_TEMPLATES) <= set(names.DISK_TEMPLATE_NAMES)
    assert set(names.STORAGE_TYPES) == set(names.DISK_TEMPLATE_NAMES)
    table = templates.DISK_TEMPLATES
    for name, template in table.items():
        # Both sides name the same template and storage type (Ganeti's).
        assert name == template.name == registry.NODE_TEMPLATES[name].NAME
        assert template.storage_type == names.STORAGE_TYPES[name]
        assert template.storage_type == registry.NODE_TEMPLATES[name].STORAGE_TYPE
        # Only the internally mirrored one keeps a copy on a secondary node.
        assert template.secondaries == (template.mirroring is Mirroring.INTERNAL)
    # Ganeti's DTS_EXT_MIRROR, DTS_COPYABLE, DTS_GROWABLE and DTS_MUST_ADOPT,
    # for what Corral has.
    mirroring = {n: t.mirroring for n, t in table.items()}
    assert mirroring == {
        "diskless": Mirroring.EXTERNAL,
        "file": Mirroring.NONE,
        "sharedfile": Mirroring.EXTERNAL,
        "blockdev": Mirroring.EXTERNAL,
        "mirrored": Mirroring.INTERNAL,
    }
    assert {n for n, t in table.items() if t.moves.copy} == {"file"}
    # Ganeti's DTS_MIRRORED fail over and migrate.
    assert {n for n, t in table.items() if t.moves.failover} == {
        n for n, m in mirroring.items() if m is not Mirroring.NONE
    }
    assert {n for n, t in table.items() if t.moves.migrate} == {
        n for n, m in mirroring.items() if m is not Mirroring.NONE
    }
    assert {n for n, t in table.items() if t.growable} == {"file", "sharedfile", "mirrored"}
    assert {n for n, t in table.items() if t.adopts} == {"blockdev"}
    assert {n for n, t in table.items() if t.counts_space} == {"file", "sharedfile", "mirrored"}


DIRS = templates.StorageDirs("/srv/files", "/srv/shared")


def _ledger(*instances: Instance, job: str = "1", name: str = "inst1") -> JobLedger:
    return JobLedger(Reservations(), job, name, lambda: instances)


def _disk(template: str, spec: dict[str, object], index: int = 0) -> Disk:
    where = templates.Placement("inst1", "node-a", DIRS)
    return templates.get(template).new_disk(where, index, {"size": 8, **spec}, _ledger())


def test_new_disks_have_each_templates_shape() -> None:
    file_disk = _disk("file", {"driver": None, "name": "data"})
    assert file_disk.logical_id[0] == "loop"
    assert file_disk.logical_id[1].startswith("/srv/files/inst1/")
    assert file_disk.logical_id[1].endswith(".file.disk0")
    assert (file_disk.iv_name, file_disk.name, file_disk.size) == ("disk/0", "data", 8)
    # As Ganeti: a file disk is on its primary node; a shared one on none.
    assert (file_disk.nodes, file_disk.children) == (["node-a"], [])
    shared = _disk("sharedfile", {"driver": "blktap"}, 2)
    assert shared.logical_id[0] == "blktap" and shared.logical_id[1].startswith("/srv/shared/")
    assert shared.nodes == [] and shared.holders("node-b") == ["node-b"]
    adopted = _disk("blockdev", {"adopt": "/dev/disk/by-id/x/"})
    assert adopted.logical_id == ["manual", "/dev/disk/by-id/x"] and adopted.nodes == []
    assert templates.disk_path(adopted) == "/dev/disk/by-id/x"
    assert templates.disk_path(file_disk) == file_disk.logical_id[1]
    assert templates.get("blockdev").backend_type(adopted) == "block"
    assert templates.get("file").backend_type(file_disk) == "file:loop"


def _instance(name: str, template: str, disks: list[Disk], port: int | None = None) -> Instance:
    return Instance(
        name=name,
        primary_node="node-a",
        os="",
        hypervisor="fake",
        disk_template=template,
        disks=disks,
        network_port=port,
    )


def test_a_new_disk_may_not_hold_what_another_holds() -> None:
    other = _instance("other", "blockdev", [_disk("blockdev", {"adopt": "/dev/disk/by-id/x"})])
    device = Resource(templates.RES_DEVICE, "/dev/disk/by-id/x", "node-a")
    assert reservations.holders([other], templates.RES_DEVICE) == {device: "other"}
    assert reservations.holders([other], templates.RES_PATH) == {}
    spec = {"size": 1, "adopt": "/dev/disk/by-id/x"}
    with pytest.raises(errors.OpPrereqError) as err:
        templates.get("blockdev").new_disk(
            templates.Placement("inst1", "node-a", DIRS), 0, spec, _ledger(other)
        )
    assert err.value.message == "Device /dev/disk/by-id/x is already adopted by instance other"
    assert err.value.ecode == C.ECODE_NOTUNIQUE
    # On another node the device is another one.
    elsewhere = templates.Placement("inst1", "node-b", DIRS)
    templates.get("blockdev").new_disk(elsewhere, 0, spec, _ledger(other))
    # A file's path is held on its node; a shared file's in the whole cluster.
    file_disk, shared = _disk("file", {}), _disk("sharedfile", {})
    assert templates.get("file").held(file_disk, "node-a") == [
        Resource(templates.RES_PATH, file_disk.logical_id[1], "node-a")
    ]
    assert templates.get("sharedfile").held(shared, "node-a") == [
        Resource(templates.RES_PATH, shared.logical_id[1], None)
    ]
    # What each template's disks hold is declared with it.
    holds = {name: t.holds for name, t in templates.DISK_TEMPLATES.items()}
    assert holds == {
        "diskless": frozenset(),
        "file": {templates.RES_PATH},
        "sharedfile": {templates.RES_PATH},
        "blockdev": {templates.RES_DEVICE},
        "mirrored": {templates.RES_PORT, templates.RES_PATH},
    }


def test_what_a_running_job_takes_stays_reserved_until_it_ends() -> None:
    shared = Reservations()
    first = JobLedger(shared, "1", "new1", list)
    second = JobLedger(shared, "2", "new2", list)
    spec = {"size": 1, "adopt": "/dev/disk/by-id/x"}
    blockdev, where = templates.get("blockdev"), templates.Placement("new1", "node-a", DIRS)
    blockdev.new_disk(where, 0, spec, first)
    # Its own job may take the device again (the adoption's second look) ...
    blockdev.new_disk(where, 0, spec, first)
    # ... another job may not, while the first runs.
    with pytest.raises(errors.OpPrereqError, match="already adopted by instance new1"):
        blockdev.new_disk(where, 0, spec, second)
    # Ganeti's ports: one more than the highest held or reserved, from 11000 on.
    assert ports.allocate_port(first) == 11000
    assert ports.allocate_port(second) == 11001
    # The first job ends (its instance committed, or not): all it held is free.
    shared.release("1")
    assert len(shared) == 1
    blockdev.new_disk(where, 0, spec, second)
    assert ports.allocate_port(second) == 11002
    shared.release("2")
    assert len(shared) == 0


def test_what_instances_hold_is_derived_from_the_configuration() -> None:
    committed = [
        _instance("a", "blockdev", [_disk("blockdev", {"adopt": "/dev/disk/y"})], 11005),
        _instance("b", "diskless", [], 11001),
    ]
    ledger = JobLedger(Reservations(), "1", "new", lambda: committed)
    assert ports.allocate_port(ledger) == 11006
    assert ledger.holder(Resource(templates.RES_PORT, 11001)) == "b"
    assert ledger.holder(Resource(templates.RES_DEVICE, "/dev/disk/y", "node-a")) == "a"
    # Removing an instance from the configuration releases what it held.
    committed.pop(0)
    assert ledger.holder(Resource(templates.RES_DEVICE, "/dev/disk/y", "node-a")) is None
    assert ports.allocate_port(_ledger(*committed)) == 11002
    # (the port ``ledger`` took stays reserved for its job meanwhile)
    assert ports.allocate_port(ledger) == 11007


def test_holders_are_looked_up_only_when_a_template_asks() -> None:
    asked: list[bool] = []

    def instances() -> list[Instance]:
        asked.append(True)
        return []

    ledger = JobLedger(Reservations(), "1", "i", instances)
    where = templates.Placement("i", "n", DIRS)
    # A fresh file path cannot clash: nobody is asked.
    templates.get("file").new_disk(where, 0, {"size": 1}, ledger)
    assert asked == []
    templates.get("blockdev").new_disk(where, 0, {"size": 1, "adopt": "/dev/disk/y"}, ledger)
    assert asked == [True]


def test_renames_and_moves_follow_the_template() -> None:
    file_disk = _disk("file", {})
    renamed = templates.get("file").renamed(file_disk, "inst2")
    assert renamed is not None
    assert renamed[1] == file_disk.logical_id[1].replace("/inst1/", "/inst2/")
    assert (
        templates.get("blockdev").renamed(_disk("blockdev", {"adopt": "/dev/disk/z"}), "x") is None
    )
    assert not templates.get("file").moves.allows(failover=True, hypervisor_copies=True)
    assert not templates.get("file").moves.allows(failover=False, hypervisor_copies=False)
    assert templates.get("file").moves.allows(failover=False, hypervisor_copies=True)
    assert templates.get("blockdev").moves.allows(failover=True, hypervisor_copies=False)


def test_capacity_units_are_the_templates_directories() -> None:
    assert templates.get("file").capacity_unit(DIRS) == StorageUnit("file", "/srv/files")
    assert templates.get("sharedfile").capacity_unit(DIRS) == StorageUnit(
        "sharedfile", "/srv/shared"
    )
    assert templates.get("blockdev").capacity_unit(DIRS) is None
    # Templates whose space is not counted, and no template, report the default unit.
    assert templates.capacity_unit("diskless", DIRS) == templates.default_unit(DIRS)
    assert templates.capacity_unit(None, DIRS) == StorageUnit("file", "/srv/files")
    assert StorageUnit.from_wire(["sharedfile", "/srv/shared"]) == StorageUnit(
        "sharedfile", "/srv/shared"
    )
    for bad in ("/srv/files", ["file"], ["file", ""], ["file", 7], ["file", "/a", "b"]):
        with pytest.raises(errors.OpExecError, match="Invalid storage unit"):
            StorageUnit.from_wire(bad)


def test_the_mirrored_template_places_a_copy_on_each_node() -> None:
    template = templates.get(names.DT_MIRRORED)
    assert templates.check_implemented(names.DT_DRBD) is template  # Ganeti's name for it
    template.check_secondaries(1)
    with pytest.raises(errors.OpPrereqError, match="needs 1 secondary node\\(s\\), 0 given"):
        template.check_secondaries(0)
    with pytest.raises(errors.OpPrereqError, match="give no secondary node"):
        templates.get("file").check_secondaries(1)
    where = Placement("inst1", "node-a", DIRS, ("node-b",))
    shared = Reservations()
    disk = template.new_disk(where, 0, {"size": 4}, JobLedger(shared, "1", "inst1", list))
    assert disk.nodes == ["node-a", "node-b"]
    # Its port comes from the cluster's one range, reserved until the job ends.
    assert disk.logical_id == ["node-a", "node-b", "11000"]
    assert ports.allocate_port(JobLedger(shared, "2", "inst2", list)) == 11001
    # Its data: one file at the same path on both nodes, which it holds on each.
    [child] = disk.children
    assert child.dev_type == names.DT_FILE and child.nodes == ["node-a", "node-b"]
    path = child.logical_id[1]
    assert path.startswith("/srv/files/inst1/") and path.endswith(".mirrored.disk0")
    assert template.held(disk, "node-a") == [
        Resource(templates.RES_PORT, 11000),
        Resource(templates.RES_PATH, path, "node-a"),
        Resource(templates.RES_PATH, path, "node-b"),
    ]
    # The tree reaches the nodes whole with their addresses, and comes back the same.
    described = disk.description((("a", "10.0.0.1"), ("b", "10.0.0.2")))
    wire = described.to_wire()
    assert wire["nodes"] == ["node-a", "node-b"]
    assert wire["addresses"] == [["a", "10.0.0.1"], ["b", "10.0.0.2"]]
    assert DiskDescription.from_wire(wire) == described
    assert "addresses" not in disk.description().to_wire()
    for bad in ([["a", "10.0.0.1"]], [["a"], ["b"]], [["a", 1], ["b", "x"]]):
        with pytest.raises(errors.OpExecError, match="bad addresses"):
            DiskDescription.from_wire({**wire, "addresses": bad})


def test_disks_of_an_older_configuration_get_their_nodes(tmp_path: Path) -> None:
    def row(uuid: str, template: str, logical_id: list[str]) -> dict[str, Any]:
        disk = {"uuid": f"d-{uuid}", "size": 8, "dev_type": template, "logical_id": logical_id}
        return {
            "uuid": uuid,
            "name": f"inst-{uuid}",
            "primary_node": "node-a",
            "os": "",
            "hypervisor": "fake",
            "disk_template": template,
            "disks": [disk],
        }

    cluster = Cluster(name="c", master_node="node-a", master_ip="127.0.0.1")
    tables = {
        "cluster": [cluster.model_dump()],
        "instances": [
            row("i1", "file", ["loop", "/srv/files/inst1/x"]),
            row("i2", "sharedfile", ["loop", "/srv/shared/inst2/x"]),
        ],
    }
    # The configuration fills them in as it loads (never opening the store).
    cfg = ConfigManager(SqliteConfigStore(tmp_path / "config.db"), ConfigSnapshot(1, tables))
    old_file, old_shared = cfg.lookup(Instance, "i1"), cfg.lookup(Instance, "i2")
    assert old_file.disks[0].nodes == ["node-a"] and old_file.disks[0].children == []
    assert old_shared.disks[0].nodes == []
    # What is stored now loads the same.
    again = Instance.model_validate(old_file.model_dump())
    assert again == old_file
    # A change of primary node moves a file disk with it; a shared disk stays on none.
    templates.set_primary(old_file, "node-b")
    templates.set_primary(old_shared, "node-b")
    assert (old_file.disks[0].nodes, old_shared.disks[0].nodes) == (["node-b"], [])


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


async def test_file_disks_assemble_shut_down_and_report_their_state(paths: Paths) -> None:
    node = FileTemplate(paths)
    disk = file_disk("d0", 4)
    assert node.sync_status(disk) == SyncStatus(present=False)
    node.create(disk)
    # A file is ready as it is: assembling names it, shutting down keeps it.
    assert await node.assemble(disk) == paths.file_storage_dir / "inst1" / "d0"
    await node.shutdown(disk)
    assert node.attach(disk).exists()
    assert node.sync_status(disk) == SyncStatus(present=True)
    assert node.sync_status(file_disk("d0", 8)) == SyncStatus(
        present=True, problem="disk d0 has 4 MiB, not 8 MiB"
    )
    # The path is checked as for every other operation.
    with pytest.raises(errors.OpExecError, match="outside the file storage directory"):
        await node.assemble(disk.with_logical_id(("loop", "/etc/passwd")))
    async with registry.local_path(paths, disk.to_wire()) as path:
        assert path == node.attach(disk)
    assert registry.plain_path(paths, disk.to_wire()) == node.attach(disk)


def test_capacity_is_asked_by_storage_unit(paths: Paths) -> None:
    top = paths.to_wire(paths.file_storage_dir)
    shared = paths.to_wire(paths.shared_file_storage_dir)
    space = registry.capacity(paths, ["file", top])
    st = os.statvfs(paths.file_storage_dir)
    assert space == Capacity(st.f_blocks * st.f_frsize // MIB, space.free)
    assert 0 <= space.free <= space.total
    assert registry.capacity(paths, ["sharedfile", shared]).total == space.total
    # Each storage type's key must be one of its own directories.
    with pytest.raises(errors.OpExecError, match="outside the file storage directory"):
        registry.capacity(paths, ["file", shared])
    with pytest.raises(errors.OpExecError, match="outside the file storage directory"):
        registry.capacity(paths, ["file", "/etc"])
    with pytest.raises(errors.OpExecError, match="reports no capacity"):
        registry.capacity(paths, ["blockdev", "/dev/disk"])
    with pytest.raises(errors.OpExecError, match="'lvm-vg' is not served by this node"):
        registry.capacity(paths, ["lvm-vg", "xenvg"])


def test_storage_units_say_what_a_node_lacks(paths: Paths) -> None:
    file_node, shared_node = FileTemplate(paths), SharedFileTemplate(paths)
    assert file_node.unit_problem(paths.to_wire(paths.file_storage_dir)) is None
    assert file_node.unit_problem(None) == "no file storage directory is set"
    assert shared_node.unit_problem("/srv/nowhere") == (
        "the shared file storage directory /srv/nowhere does not exist"
    )
    assert BlockDevTemplate(paths).unit_problem(None) is None
