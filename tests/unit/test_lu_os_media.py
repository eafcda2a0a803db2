"""design-os's OS images and personalization packages, against real nodes
in-process (tests/helpers/inprocess.py) and a real http server on loopback
(tests/helpers/media_server.py): what lands on disk 0, and bad input that
creates nothing and says why."""

from __future__ import annotations

import asyncio
import gzip
import io
import os
import shutil
import subprocess
import tarfile
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import testbed
from corral.cmdlib import os_media
from corral.node.handlers import HANDLERS
from tests.helpers.inprocess import InProcessCluster, create_op, in_process_cluster
from tests.helpers.leaks import files_holding
from tests.helpers.media_server import MediaServer, media_server
from tests.helpers.noded import free_port
from tests.helpers.osdef import make_os
from tests.helpers.waiting import wait_until_async

INST = "inst1.example.com"
MIB = 1 << 20
USER, PASSWORD = "pkg-user", "pkg-pa55-7f3e9c"
MKFS_OS = "mkfs"
# Data of the test image: (offset in MiB, bytes); the rest is holes.
IMAGE_DATA = ((0, b"boot sector" * 40), (3, b"\x01" * MIB), (7, b"tail"))
IMAGE_MIB = 8
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("losetup") is None or shutil.which("debugfs") is None,
    reason="unpacking a package mounts a loop device (root, losetup, debugfs)",
)


@pytest.fixture
async def cl(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    async with in_process_cluster(tmp_path / "cluster", nodes=1) as cluster:
        yield cluster


@pytest.fixture
def server() -> Iterator[MediaServer]:
    with media_server() as srv:
        yield srv


def raw_image(path: Path, mib: int = IMAGE_MIB) -> Path:
    """A sparse raw image: IMAGE_DATA at its offsets, holes elsewhere."""
    with path.open("wb") as f:
        f.truncate(mib * MIB)
        for offset, data in IMAGE_DATA:
            f.seek(offset * MIB)
            f.write(data)
    return path


def qcow2_of(raw: Path) -> Path:
    qcow2 = raw.with_suffix(".qcow2")
    subprocess.run(
        ["qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", str(raw), str(qcow2)],
        check=True,
    )
    return qcow2


def create(template: str = "file", disk_mib: int = 16, **fields: Any) -> dict[str, Any]:
    op = create_op(INST, testbed.node_name(1), template, [{"size": disk_mib}])
    return {**op, **fields}


def with_image(image: str, disk_mib: int = 16) -> dict[str, Any]:
    """A create of an image only (no OS: ``-o`` is optional then)."""
    return create(disk_mib=disk_mib, os_type=None, osparams={"os-image": image})


def disk0(cl: InProcessCluster) -> Path:
    (name,) = cl.disk_files(1)
    return cl.node(1).paths.file_storage_dir / name


def assert_holds_image(disk: Path, image_mib: int = IMAGE_MIB) -> None:
    data = disk.read_bytes()
    assert data[: image_mib * MIB] == raw_image_bytes(image_mib)
    assert data[image_mib * MIB :].count(0) == len(data) - image_mib * MIB


def raw_image_bytes(mib: int) -> bytes:
    buf = bytearray(mib * MIB)
    for offset, data in IMAGE_DATA:
        buf[offset * MIB : offset * MIB + len(data)] = data
    return bytes(buf)


def allocated(path: Path) -> int:
    return path.stat().st_blocks * 512


async def assert_nothing_created(cl: InProcessCluster, job: Any, message: str) -> None:
    assert job.status == C.JOB_STATUS_ERROR, job.log
    assert message in job.error, job.error
    assert cl.instance(INST) is None
    assert cl.disk_files(1) == []


# OS images


async def test_an_image_from_a_path_is_written_onto_disk_0_with_its_holes(
    cl: InProcessCluster, tmp_path: Path
) -> None:
    image = raw_image(tmp_path / "disk.img")
    job = await cl.run(with_image(str(image)))
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert f"Imaging disk '0' for instance '{INST}' on node '{testbed.node_name(1)}'" in job.log
    assert any("image of 8 MiB written" in line for line in job.log), job.log
    disk = disk0(cl)
    assert_holds_image(disk)
    # The holes stayed holes: about 1 MiB of data of 16 MiB.
    assert allocated(disk) < 2 * MIB
    inst = cl.instance(INST)
    assert inst is not None and inst.os == "" and inst.osparams == {"os-image": str(image)}


@pytest.mark.parametrize("fmt", ["raw", "qcow2"])
async def test_an_image_from_a_url_is_streamed_onto_disk_0(
    cl: InProcessCluster, tmp_path: Path, server: MediaServer, fmt: str
) -> None:
    image = raw_image(tmp_path / "disk.img")
    served = image if fmt == "raw" else qcow2_of(image)
    server.files["/images/disk.img"] = served
    job = await cl.run(with_image(server.url("/images/disk.img")))
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert_holds_image(disk0(cl))
    assert allocated(disk0(cl)) < 2 * MIB
    assert server.whole_fetches("/images/disk.img") == 1
    assert list(cl.node(1).paths.os_media_dir.glob("*")) == []


async def test_the_progress_of_a_write_is_in_the_job_log(
    cl: InProcessCluster, tmp_path: Path, server: MediaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream stops half way until the master has been told so."""
    monkeypatch.setattr(os_media, "PROGRESS_EVERY", 0.005)
    seen: list[list[int]] = []
    polled = HANDLERS["blockdev_image_progress"]

    async def recording(ctx: Any, token: str) -> Any:
        answer = await polled(ctx, token)
        if answer:
            seen.append(answer)
        return answer

    monkeypatch.setitem(HANDLERS, "blockdev_image_progress", recording)
    gate = threading.Event()
    server.files["/slow.img"] = raw_image(tmp_path / "disk.img")
    server.holds["/slow.img"] = (4 * MIB, gate)
    job = asyncio.ensure_future(cl.run(with_image(server.url("/slow.img"))))
    await wait_until_async(lambda: any(done >= 4 * MIB for done, _ in seen), 20, "progress")
    gate.set()
    outcome = await job
    assert outcome.status == C.JOB_STATUS_SUCCESS, outcome.error
    assert any(line.startswith(" - disk/0: 4 of 8 MiB (50%)") for line in outcome.log), outcome.log


async def test_reinstall_writes_the_image_again_over_what_the_disk_held(
    cl: InProcessCluster, tmp_path: Path
) -> None:
    image = raw_image(tmp_path / "disk.img")
    job = await cl.run(create())
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    disk0(cl).write_bytes(b"\xff" * 16 * MIB)
    job = await cl.run(
        {
            "OP_ID": "OP_INSTANCE_REINSTALL",
            "instance_name": INST,
            "osparams": {"os-image": str(image)},
        }
    )
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert f"Using OS image '{image}'" in job.log
    assert "Running the instance OS create scripts..." in job.log
    assert_holds_image(disk0(cl))


async def test_an_image_larger_than_disk_0_is_refused_before_anything_is_written(
    cl: InProcessCluster, tmp_path: Path
) -> None:
    image = raw_image(tmp_path / "disk.img", mib=12)
    job = await cl.run(with_image(str(image), disk_mib=8))
    await assert_nothing_created(cl, job, "Image size is bigger than device size: ")
    assert "needs 12 MiB and disk 0 has 8 MiB" in job.error


async def test_a_reinstall_with_an_image_too_large_leaves_the_disk_as_it_was(
    cl: InProcessCluster, tmp_path: Path
) -> None:
    job = await cl.run(create(disk_mib=8))
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    disk0(cl).write_bytes(b"\xab" * 8 * MIB)
    image = raw_image(tmp_path / "disk.img", mib=12)
    job = await cl.run(
        {
            "OP_ID": "OP_INSTANCE_REINSTALL",
            "instance_name": INST,
            "osparams": {"os-image": str(image)},
        }
    )
    assert job.status == C.JOB_STATUS_ERROR and "bigger than device size" in job.error
    assert disk0(cl).read_bytes() == b"\xab" * 8 * MIB
    inst = cl.instance(INST)
    assert inst is not None and "os-image" not in inst.osparams


def gzip_file(path: Path) -> Path:
    path.write_bytes(gzip.compress(b"not a disk"))
    return path


@pytest.mark.parametrize(
    ("image", "message"),
    [
        ("disk.img", "OS image must be an absolute path or a URL"),
        ("/nonexistent/disk.img", "Image '/nonexistent/disk.img' not found"),
        ("GZIP", "Unknown image format: "),
        ("UNREACHABLE", "Could not fetch http://127.0.0.1:"),
        ("MISSING", "answered 404"),
    ],
)
async def test_a_bad_image_creates_nothing_and_says_why(
    cl: InProcessCluster, tmp_path: Path, server: MediaServer, image: str, message: str
) -> None:
    given = {
        "GZIP": lambda: str(gzip_file(tmp_path / "disk.img.gz")),
        "UNREACHABLE": lambda: f"http://127.0.0.1:{free_port()}/disk.img",
        "MISSING": lambda: server.url("/nothing.img"),
    }.get(image, lambda: image)()
    job = await cl.run(with_image(given))
    await assert_nothing_created(cl, job, message)
    assert job.result[1][1] == C.ECODE_INVAL


async def test_a_qcow2_with_a_backing_file_is_refused(cl: InProcessCluster, tmp_path: Path) -> None:
    base = qcow2_of(raw_image(tmp_path / "base.img"))
    overlay = tmp_path / "overlay.qcow2"
    subprocess.run(
        ["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(base), str(overlay)],
        check=True,
    )
    job = await cl.run(with_image(str(overlay)))
    await assert_nothing_created(cl, job, "has a backing file")


async def test_neither_os_nor_image_is_refused_as_ganeti_does(cl: InProcessCluster) -> None:
    job = await cl.run(create(os_type=None))
    await assert_nothing_created(cl, job, "No guest OS or OS image specified")


async def test_modify_stores_an_image_url_unchecked_and_default_removes_it(
    cl: InProcessCluster,
) -> None:
    job = await cl.run(create())
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    url = "http://example.com/busybox.img"
    for value, expected in ((url, {"os-image": url}), ("default", {})):
        job = await cl.run(
            {
                "OP_ID": "OP_INSTANCE_SET_PARAMS",
                "instance_name": INST,
                "osparams": {"os-image": value},
            }
        )
        assert job.status == C.JOB_STATUS_SUCCESS, job.error
        inst = cl.instance(INST)
        assert inst is not None and inst.osparams == expected


@pytest.mark.parametrize("offline", [True, False])
async def test_a_running_instance_is_marked_neither_offline_nor_online(
    cl: InProcessCluster, offline: bool
) -> None:
    """The end of Ganeti's TestInstanceModify, after its os-image steps: both
    need the instance down (--online used to mark a running instance down)."""
    job = await cl.run(create(start=True))
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    job = await cl.run(
        {"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": INST, "offline": offline}
    )
    assert job.status == C.JOB_STATUS_ERROR
    assert f"Instance '{INST}' is marked to be up, can't change to" in job.error
    inst = cl.instance(INST)
    assert inst is not None and inst.admin_state == "up"


# Personalization packages


def mkfs_os(cl: InProcessCluster) -> None:
    """An OS whose create script makes an ext4 filesystem holding /etc/hostname
    and /etc/kept on disk 0."""
    script = (
        "#!/bin/sh\nset -e\n"
        'tree=$(mktemp -d)\nmkdir "$tree/etc"\n'
        'echo from-os > "$tree/etc/hostname"\necho kept > "$tree/etc/kept"\n'
        'mkfs.ext4 -q -F -d "$tree" "$DISK_0_PATH"\nrm -r "$tree"\n'
    )
    make_os(cl.node(1).paths, MKFS_OS, variants=None, scripts={"create": script})


def targz(path: Path, members: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uid, info.gid = len(data), 0o600, 1000, 1000
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return path


def read_file(disk: Path, path: str) -> str:
    """A file of the ext4 filesystem on ``disk``, read in user space."""
    done = subprocess.run(
        ["debugfs", "-R", f"cat {path}", str(disk)], capture_output=True, text=True, check=True
    )
    return done.stdout


def package_op(server: MediaServer, user: str = USER, password: str = PASSWORD) -> dict[str, Any]:
    return create(
        disk_mib=16,
        os_type=MKFS_OS,
        osparams={"os-package": server.url("/pkg/site.tar.gz")},
        osparams_secret={"os-package-user": user, "os-package-password": password},
    )


@pytest.fixture
def package(cl: InProcessCluster, tmp_path: Path, server: MediaServer) -> Path:
    mkfs_os(cl)
    path = targz(
        tmp_path / "site.tar.gz",
        {"etc/hostname": b"from-package\n", "root/.ssh/authorized_keys": b"ssh-ed25519 AAAA k\n"},
    )
    server.files["/pkg/site.tar.gz"] = path
    server.protected["/pkg/site.tar.gz"] = f"{USER}:{PASSWORD}"
    return path


@needs_root
async def test_a_package_is_unpacked_over_the_os_and_fetched_again_on_reinstall(
    cl: InProcessCluster, tmp_path: Path, server: MediaServer, package: Path
) -> None:
    job = await cl.run(package_op(server))
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    disk = disk0(cl)
    assert read_file(disk, "/etc/hostname") == "from-package\n"
    assert read_file(disk, "/etc/kept") == "kept\n"
    assert read_file(disk, "/root/.ssh/authorized_keys") == "ssh-ed25519 AAAA k\n"
    assert server.whole_fetches("/pkg/site.tar.gz") == 1
    # The URL is kept, the credentials are not; the package left the node.
    inst = cl.instance(INST)
    assert inst is not None and inst.osparams == {"os-package": server.url("/pkg/site.tar.gz")}
    assert list(cl.node(1).paths.os_media_dir.glob("*")) == []
    # A new package at the same URL, fetched by the reinstall.
    targz(package, {"etc/hostname": b"second\n"})
    job = await cl.run(
        {
            "OP_ID": "OP_INSTANCE_REINSTALL",
            "instance_name": INST,
            "osparams_secret": {"os-package-user": USER, "os-package-password": PASSWORD},
        }
    )
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert server.whole_fetches("/pkg/site.tar.gz") == 2
    assert read_file(disk, "/etc/hostname") == "second\n"
    assert PASSWORD not in repr((job.log, job.result))
    assert files_holding(tmp_path, PASSWORD) == []
    assert files_holding(tmp_path, USER) == []


@needs_root
async def test_an_image_and_a_package_together(
    cl: InProcessCluster, tmp_path: Path, server: MediaServer, package: Path
) -> None:
    fs_image = tmp_path / "fs.img"
    raw_image(fs_image, mib=8)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(fs_image)], check=True)
    op = package_op(server)
    op["os_type"] = None
    op["osparams"] = {**op["osparams"], "os-image": str(fs_image)}
    job = await cl.run(op)
    assert job.status == C.JOB_STATUS_SUCCESS, job.error
    assert read_file(disk0(cl), "/etc/hostname") == "from-package\n"


def not_targz(path: Path) -> None:
    path.write_bytes(b"just text, no archive\n")


def gzip_not_tar(path: Path) -> None:
    path.write_bytes(gzip.compress(b"gzip but no tar" * 100))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("wrong-password", "answered 401 Unauthorized: the credentials are wrong or missing"),
        ("text", "is not a tar.gz archive (it is not gzip-compressed)"),
        ("gzip-not-tar", "is not a tar.gz archive"),
        ("escape", "cannot be unpacked safely"),
        ("absolute-link", "cannot be unpacked safely"),
    ],
)
@needs_root
async def test_a_bad_package_creates_nothing_and_says_why(
    cl: InProcessCluster,
    tmp_path: Path,
    server: MediaServer,
    package: Path,
    change: str,
    message: str,
) -> None:
    password = PASSWORD
    if change == "wrong-password":
        password = "n0t-the-pa55word"
    elif change == "text":
        not_targz(package)
    elif change == "gzip-not-tar":
        gzip_not_tar(package)
    elif change == "escape":
        targz(package, {"../../escaped": b"out"})
    else:
        targz(package, {"etc/shadow-link/x": b"y"}, links={"etc/shadow-link": "/etc"})
    job = await cl.run(package_op(server, password=password))
    await assert_nothing_created(cl, job, message)
    assert not (tmp_path / "escaped").exists()
    assert list(cl.node(1).paths.os_media_dir.glob("*")) == []
    assert files_holding(tmp_path, PASSWORD) == []


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"osparams": {"os-package": "http://h/p.tgz", "os-package-password": "x"}},
            "is a credential: give it only with --os-parameters-secret",
        ),
        ({"osparams": {"os-package": "http://h/p.zip"}}, "ending in .tar.gz or .tgz"),
        (
            {"osparams": {"os-package": "http://u:p@h/p.tgz"}},
            "URL must not hold credentials",
        ),
        (
            {"osparams": {"os-package": "http://h/p.tgz"}, "no_install": True},
            "A personalization package is unpacked over an installed OS",
        ),
    ],
)
async def test_package_parameters_are_checked_before_anything_is_done(
    cl: InProcessCluster, params: dict[str, Any], message: str
) -> None:
    job = await cl.run(create(**params))
    await assert_nothing_created(cl, job, message)
