"""OS images and personalization packages end to end: gnt-instance against
real daemons, the media served over http on a loopback address of its own.

An instance is added from a qcow2 image URL without ``-o`` (as Ganeti 3
allows), with a personalization package behind basic auth whose credentials
are secret parameters; a reinstall fetches the package again; afterwards the
credentials are in no file under the test's directory (cluster root, logs,
databases, the disk itself).  An image larger than the disk is refused and
adds nothing.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cluster import TestCluster, running_cluster, unique_loopback
from tests.helpers.leaks import files_holding
from tests.helpers.media_server import MediaServer, media_server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not all(shutil.which(t) for t in ("qemu-img", "losetup", "mkfs.ext4", "debugfs")),
        reason="needs qemu-img, losetup, mkfs.ext4 and debugfs",
    ),
]

INSTANCE = "media1.example.com"
USER, PASSWORD = "media-user", "M3d1a-pa55-5c0e71"
PACKAGE = "/site/keys.tgz"
IMAGE = "/images/root.qcow2"


def ext4_qcow2(base: Path, mib: int) -> Path:
    """A qcow2 image of an ext4 filesystem holding /etc/hostname."""
    tree = base / "tree"
    (tree / "etc").mkdir(parents=True)
    (tree / "etc" / "hostname").write_text("from-image\n")
    raw = base / "root.raw"
    subprocess.run(["truncate", "-s", f"{mib}M", str(raw)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-d", str(tree), str(raw)], check=True)
    qcow2 = base / "root.qcow2"
    subprocess.run(
        ["qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", str(raw), str(qcow2)],
        check=True,
    )
    return qcow2


def package(path: Path, hostname: str) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        data = f"{hostname}\n".encode()
        info = tarfile.TarInfo("etc/hostname")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


def read_file(disk: Path, path: str) -> str:
    done = subprocess.run(
        ["debugfs", "-R", f"cat {path}", str(disk)], capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.fixture
def server(tmp_path: Path) -> Iterator[MediaServer]:
    with media_server(unique_loopback()) as srv:
        srv.files[IMAGE] = ext4_qcow2(tmp_path, 32)
        srv.files[PACKAGE] = package(tmp_path / "keys.tgz", "from-package")
        srv.protected[PACKAGE] = f"{USER}:{PASSWORD}"
        yield srv


@pytest.fixture
def cl(tmp_path: Path) -> Iterator[TestCluster]:
    with running_cluster(tmp_path) as cluster:
        yield cluster


def add(cl: TestCluster, server: MediaServer, disk: str, *extra: str) -> tuple[int, str]:
    result = cl.gnt(
        "instance",
        "add",
        "-t",
        "file",
        "--disk",
        f"0:size={disk}",
        "--os-parameters",
        f"os-image={server.url(IMAGE)},os-package={server.url(PACKAGE)}",
        *extra,
        "--no-name-check",
        "--no-ip-check",
        "--no-start",
        INSTANCE,
    )
    return result.rc, result.stdout + result.stderr


def secret_args(password: str = PASSWORD) -> list[str]:
    return ["--os-parameters-secret", f"os-package-user={USER},os-package-password={password}"]


def test_image_and_package_installed_and_the_package_fetched_again_on_reinstall(
    cl: TestCluster, server: MediaServer, tmp_path: Path
) -> None:
    rc, out = add(cl, server, "64m", *secret_args())
    assert rc == 0, out
    assert "Imaging disk '0'" in out and "unpacking the personalization package" in out
    (disk,) = cl.paths.file_storage_dir.rglob("*disk0")
    assert read_file(disk, "/etc/hostname") == "from-package\n"
    assert server.whole_fetches(IMAGE) == 1 and server.whole_fetches(PACKAGE) == 1

    package(server.files[PACKAGE], "second-package")
    result = cl.gnt("instance", "reinstall", "-f", *secret_args(), INSTANCE)
    assert result.rc == 0, result.stderr
    assert server.whole_fetches(IMAGE) == 2 and server.whole_fetches(PACKAGE) == 2
    assert read_file(disk, "/etc/hostname") == "second-package\n"

    info = cl.gnt("instance", "info", INSTANCE)
    assert server.url(PACKAGE) in info.stdout and PASSWORD not in info.stdout
    assert files_holding(tmp_path, PASSWORD) == []
    assert list(cl.paths.os_media_dir.glob("*")) == []


def test_an_image_larger_than_the_disk_adds_nothing(cl: TestCluster, server: MediaServer) -> None:
    rc, out = add(cl, server, "16m", *secret_args())
    assert rc != 0
    assert "Image size is bigger than device size" in out
    assert "needs 32 MiB and disk 0 has 16 MiB" in out
    listed = cl.gnt("instance", "list", "--no-headers", "-o", "name")
    assert listed.stdout.strip() == ""
    assert list(cl.paths.file_storage_dir.rglob("*disk0")) == []


def test_wrong_credentials_add_nothing(cl: TestCluster, server: MediaServer) -> None:
    rc, out = add(cl, server, "64m", *secret_args("n0t-the-pa55word"))
    assert rc != 0
    assert "answered 401 Unauthorized" in out
    assert server.whole_fetches(IMAGE) == 0
    assert list(cl.paths.file_storage_dir.rglob("*disk0")) == []
