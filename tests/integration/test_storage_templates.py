"""Disk templates behind one contract (issue 10, item 3), through gnt-instance on
a real cluster: sharedfile (with --shared-file-storage-dir) and blockdev
(adopting a loop device the test makes) created, grown, renamed and removed;
what they refuse; plain and drbd refused on a machine without device-mapper
and DRBD; a disk description that tries to reach outside refused by noded.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.disk_description import DiskDescription
from corral.rpc.calls_storage import blockdev_create, blockdev_grow, blockdev_remove
from corral.rpc.declare import Request
from tests.helpers.cluster import Result, TestCluster, running_cluster
from tests.helpers.instances import add, env_os, failed, ok, query, read_env
from tests.helpers.noded import Noded

MIB = 1024 * 1024
SHARED = "/srv/shared"
TEMPLATES = "file,diskless,sharedfile,blockdev"


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the OS scripts write their environments (outside the cluster's root)."""
    return tmp_path_factory.mktemp("os-env")


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory, out: Path) -> Iterator[TestCluster]:
    root = tmp_path_factory.mktemp("storage")
    args = ("--enabled-disk-templates", TEMPLATES, "--shared-file-storage-dir", SHARED)
    with running_cluster(root, *args) as cluster:
        env_os(cluster.paths, "dump", out, variants=None)
        yield cluster


@pytest.fixture
def loop_device(tmp_path: Path) -> Iterator[Path]:
    """A loop device of 8 MiB starting with a marker, detached afterwards."""
    image = tmp_path / f"loop-{secrets.token_hex(4)}.img"
    with image.open("wb") as handle:
        handle.write(b"MARKER")
        handle.truncate(8 * MIB)
    done = subprocess.run(
        ["losetup", "-f", "--show", str(image)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"no loop device available: {done.stderr.strip()}")
    device = Path(done.stdout.strip())
    try:
        yield device
    finally:
        subprocess.run(["losetup", "-d", str(device)], check=False)


def add_on(cl: TestCluster, name: str, *args: str) -> Result:
    """``gnt-instance add`` on the first node (adoption takes no allocator)."""
    return add(cl, name, "-n", cl.node_name, *args)


def by_id(cl: TestCluster, target: Path) -> str:
    """A persistent name of ``target`` below the root's /dev/disk/ (as udev makes)."""
    name = f"/dev/disk/by-id/corral-test-{secrets.token_hex(4)}"
    link = cl.paths.from_wire(name)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    return name


def shared_files(cl: TestCluster, name: str) -> list[Path]:
    directory = cl.paths.from_wire(f"{SHARED}/{name}")
    return sorted(directory.iterdir()) if directory.exists() else []


def test_sharedfile_life_cycle(cl: TestCluster, out: Path) -> None:
    ok(add(cl, "sf1", "-t", "sharedfile", "--disk", "0:size=8m", "-o", "dump", "--no-start"))
    (disk,) = shared_files(cl, "sf1")
    assert disk.stat().st_size == 8 * MIB
    assert ".sharedfile.disk0" in disk.name
    assert not cl.paths.file_storage_dir.joinpath("sf1").exists()
    # The OS script got the disk's local path, resolved by noded.
    env = read_env(out / "create-sf1")
    assert env["DISK_0_PATH"] == str(disk)
    assert env["DISK_0_BACKEND_TYPE"] == "file:loop"
    ok(cl.gnt("instance", "grow-disk", "sf1", "0", "8m"))
    assert disk.stat().st_size == 16 * MIB
    assert query(cl, ["disk.sizes"], "sf1")["sf1"]["disk.sizes"] == [16]
    ok(cl.gnt("instance", "modify", "--disk", "add:size=4m", "sf1"))
    assert sorted(p.stat().st_size for p in shared_files(cl, "sf1")) == [4 * MIB, 16 * MIB]
    ok(cl.gnt("instance", "rename", "-f", "--no-name-check", "--no-ip-check", "sf1", "sf2"))
    assert shared_files(cl, "sf1") == []
    assert len(shared_files(cl, "sf2")) == 2
    ok(cl.gnt("instance", "remove", "-f", "sf2"))
    assert shared_files(cl, "sf2") == []
    ok(cl.gnt("cluster", "verify"))


def test_cluster_shows_and_changes_the_shared_directory(cl: TestCluster) -> None:
    assert f"shared file storage path: {SHARED}" in ok(cl.gnt("cluster", "info"))
    assert cl.paths.ssconf_file("shared_file_storage_dir").read_text() == f"{SHARED}\n"
    # As Ganeti's, a new directory is taken as given (cluster verify reports
    # one a node cannot use).
    ok(cl.gnt("cluster", "modify", "--shared-file-storage-dir", "/srv/nowhere"))
    assert "shared file storage path: /srv/nowhere" in ok(cl.gnt("cluster", "info"))
    ok(cl.gnt("cluster", "modify", "--shared-file-storage-dir", str(SHARED)))
    assert f"shared file storage path: {SHARED}" in ok(cl.gnt("cluster", "info"))


def test_blockdev_adopts_a_loop_device(cl: TestCluster, out: Path, loop_device: Path) -> None:
    name = by_id(cl, loop_device)
    # A dry run takes the device for its job, which ends there: nothing stays
    # reserved (else the add below would find it "already adopted by bd0").
    adopt = ("-t", "blockdev", "--disk", f"0:adopt={name}")
    ok(add_on(cl, "bd0", *adopt, "-o", "dump", "--no-start", "--dry-run"))
    ok(add_on(cl, "bd1", *adopt, "-o", "dump", "--no-start"))
    # The size is the device's; the OS script writes to the device itself.
    assert query(cl, ["disk.sizes"], "bd1")["bd1"]["disk.sizes"] == [8]
    assert read_env(out / "create-bd1")["DISK_0_PATH"] == str(loop_device)
    assert "manual" in ok(cl.gnt("instance", "info", "bd1"))
    failed(cl.gnt("instance", "grow-disk", "bd1", "0", "1m"), "blockdev template cannot grow")
    failed(
        cl.gnt("instance", "modify", "--disk", "add:size=1m", "bd1"),
        "Disks cannot be added to a blockdev instance",
    )
    # The same device twice is refused.
    failed(
        add_on(cl, "bd2", *adopt, "--no-install"),
        f"Device {name} is already adopted by instance bd1",
    )
    ok(cl.gnt("instance", "remove", "-f", "bd1"))
    # Removing the instance releases the device: it is not wiped nor detached.
    with loop_device.open("rb") as handle:
        assert handle.read(6) == b"MARKER"


@pytest.mark.parametrize(
    ("adopt", "texts"),
    [
        ("/dev/loop0", ["Device node(s) /dev/loop0 lie outside /dev/disk/ and cannot be adopted"]),
        (
            "/dev/disk/by-id/absent",
            ["Cannot adopt the block device(s)", "Missing block device /dev/disk/by-id/absent"],
        ),
        ("/dev/disk/../loop0", ["lie outside /dev/disk/"]),
    ],
)
def test_blockdev_refusals(cl: TestCluster, adopt: str, texts: list[str]) -> None:
    failed(
        add_on(cl, "bdx", "-t", "blockdev", "--disk", f"0:adopt={adopt}", "--no-install"), *texts
    )
    assert "bdx" not in ok(cl.gnt("instance", "list"))


def test_blockdev_refuses_what_is_not_a_block_device(cl: TestCluster, tmp_path: Path) -> None:
    regular = tmp_path / "not-a-device"
    regular.write_bytes(b"x" * MIB)
    failed(
        add_on(
            cl, "bdy", "-t", "blockdev", "--disk", f"0:adopt={by_id(cl, regular)}", "--no-install"
        ),
        "lies outside /dev",
    )
    failed(
        add_on(cl, "bdy", "-t", "blockdev", "--disk", "0:size=1g", "--no-install"),
        "Disk template blockdev requires disk adoption, but no 'adopt' parameter given",
    )
    failed(
        add_on(cl, "bdy", "-t", "file", "--disk", "0:adopt=/dev/disk/x", "--no-install"),
        "Disk adoption is not supported for the 'file' disk template",
    )


@pytest.mark.skipif(os.path.exists("/dev/mapper/control"), reason="device-mapper present")
def test_plain_is_refused_without_device_mapper(cl: TestCluster) -> None:
    text = "this machine has no device-mapper (LVM) (/dev/mapper/control does not exist)"
    failed(add(cl, "lv1", "-t", "plain", "--disk", "0:size=8m", "--no-install"), text)
    failed(cl.gnt("cluster", "modify", "--enabled-disk-templates", "file,plain"), text)


@pytest.mark.skipif(os.path.exists("/proc/drbd"), reason="DRBD present")
def test_drbd_asks_for_mirrored(cl: TestCluster) -> None:
    # Ganeti's name for its internally mirrored template is Corral's mirrored
    # (tests/unit/test_lu_mirrored.py): not enabled here, it says so.
    failed(
        add(cl, "dr1", "-t", "drbd", "--disk", "0:size=8m", "--no-install"),
        "Disk template 'mirrored' is not enabled in the cluster",
    )


async def test_noded_refuses_a_path_trick(cl: TestCluster, loop_device: Path) -> None:
    noded = Noded(cl.paths, cl.node_ip, cl.port, cl.node_name)
    victim = cl.paths.server_pem
    tricks = [
        DiskDescription(
            "sharedfile", ("loop", f"{SHARED}/../../var/lib/ganeti/server.pem"), 1, "u"
        ),
        DiskDescription("sharedfile", ("loop", cl.paths.to_wire(victim)), 1, "u"),
        DiskDescription("file", ("loop", f"{SHARED}/x/disk0"), 1, "u"),  # the other template's
        DiskDescription("blockdev", ("manual", str(loop_device)), 1, "u"),
        DiskDescription("blockdev", ("loop", "/dev/disk/by-id/x"), 1, "u"),
    ]
    before = victim.read_bytes()
    async with noded.client() as rpc:
        for trick in tricks:
            disk = trick.to_wire()
            for request in (
                blockdev_remove(disk),
                blockdev_grow(disk, 64),
                blockdev_create(disk),
            ):
                res = await rpc.result(noded.target, request)
                assert res.failed and "Traceback" not in str(res.fail_msg), (trick, res)
        # A bare path, sent as it is (no declaration makes it): refused at the door.
        res = await rpc.result(noded.target, Request(blockdev_remove, [{"path": str(victim)}]))
        assert str(res.fail_msg).startswith("Invalid argument disk.template of blockdev_remove")
    assert victim.read_bytes() == before
    assert not cl.paths.from_wire(f"{SHARED}/x").exists()
