"""Corral's install appliance: the disk image a cluster's ``--install-image``
names, which boots the helper VM of ``install`` mode (design-os).

Built from Debian's packages as the test guests are (:mod:`tests.helpers.guest`:
the cloud kernel, a busybox initramfs, GRUB's BIOS images, each from
``apt-get download`` and cached): a raw disk with GRUB in its first MiB and an
ext2 partition holding the kernel and the initramfs.  The helper VM attaches
it read-only and runs from RAM (the initramfs is its root: what it writes is
gone at power off).  What it does is scripts/install-image/init.  The
operator's command is scripts/build-install-image.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.helpers import guest

SOURCE = guest.REPO / "scripts" / "install-image"
# Files of the appliance's initramfs (besides busybox and the modules): source → place.
FILES = {
    "init": ("init", 0o755),
    "udhcpc.script": ("etc/udhcpc.script", 0o755),
    "json-params.awk": ("etc/json-params.awk", 0o644),
}
FS_OFFSET = 1 << 20  # partition 1 starts at 1 MiB, after GRUB (guest.BOOT_AREA_BYTES)
GRUB_CFG = (
    "linux /boot/vmlinuz console=ttyS0,115200 quiet panic=-1\ninitrd /boot/initrd.img\nboot\n"
)
# What the appliance prints and reports as its identity (with the build's hash).
APPLIANCE_NAME = "corral-install-appliance"


def _inputs_key() -> str:
    kernel = guest.guest_kernel_files()
    parts = [kernel.vmlinuz.parent.name, guest.package(guest.BUSYBOX_PKG).sha256]
    parts += [guest.package(guest.GRUB_PKG).sha256, guest.package(guest.GRUB_TOOLS_PKG).sha256]
    parts += [hashlib.sha256((SOURCE / name).read_bytes()).hexdigest() for name in sorted(FILES)]
    parts.append(GRUB_CFG)
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _initramfs(identity: str) -> bytes:
    kernel = guest.guest_kernel_files()
    archive = guest.Cpio()
    for empty in ("proc", "sys", "dev", "tmp", "mnt", "root"):
        archive.directory(empty)
    archive.char_device("dev/console", 5, 1)
    for source, (place, mode) in FILES.items():
        archive.file(place, (SOURCE / source).read_bytes(), mode)
    archive.file("etc/corral-appliance", f"{identity}\n".encode())
    archive.file("bin/busybox", guest.busybox().read_bytes(), 0o755)
    for applet in guest.busybox_applets():
        if applet != "bin/busybox":
            archive.symlink(applet, "/bin/busybox")
    order = "".join(f"{kernel.version}/{module}\n" for module in kernel.modules)
    archive.file("etc/corral-modules", order.encode())
    for module in kernel.modules:
        data = (kernel.modules_dir / module).read_bytes()
        archive.file(f"lib/modules/{kernel.version}/{module}", data)
    return gzip.compress(archive.finish(), compresslevel=9, mtime=0)


def _le32(value: int) -> bytes:
    return value.to_bytes(4, "little")


def build(output: Path) -> str:
    """Write the appliance's disk image to ``output``; its identity."""
    key = _inputs_key()
    identity = f"{APPLIANCE_NAME} {key}"
    with tempfile.TemporaryDirectory(prefix="appliance-") as tmp:
        stage = Path(tmp) / "fs"
        (stage / "boot" / "grub").mkdir(parents=True)
        shutil.copy2(guest.guest_kernel(), stage / "boot" / "vmlinuz")
        (stage / "boot" / "initrd.img").write_bytes(_initramfs(identity))
        (stage / "boot" / "grub" / "grub.cfg").write_text(GRUB_CFG)
        fs_kib = (sum(p.stat().st_size for p in stage.rglob("*") if p.is_file()) >> 10) * 5 // 4
        fs_kib += 2048
        image = Path(tmp) / "image"
        image.write_bytes(b"")
        os.truncate(image, FS_OFFSET + fs_kib * 1024)
        subprocess.run(
            ["mke2fs", "-q", "-F", "-t", "ext2", "-L", "corral-installer",
             "-E", f"offset={FS_OFFSET},nodiscard", "-d", str(stage), str(image), f"{fs_kib}k"],
            check=True, capture_output=True,
        )  # fmt: skip
        area = bytearray(guest.grub_boot_area().read_bytes())
        # One bootable Linux partition from 1 MiB to the end (CHS "beyond 8 GiB": LBA only).
        entry = b"\x80\xfe\xff\xff\x83\xfe\xff\xff" + _le32(FS_OFFSET // 512) + _le32(fs_kib * 2)
        area[446 : 446 + 16] = entry
        area[510:512] = b"\x55\xaa"
        with image.open("r+b") as handle:
            handle.write(area)
        image.chmod(0o644)
        output.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(image, output)
    return identity


@functools.cache
def install_image() -> Path:
    """The appliance's image, built once for these inputs (cached in .cache/guest)."""
    final = guest.CACHE / f"install-image-{_inputs_key()}.img"
    if not final.is_file():
        guest.CACHE.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".install-image-", dir=guest.CACHE)
        os.close(fd)
        try:
            build(Path(tmp))
            os.replace(tmp, final)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return final


def identity_of(image: Path) -> str:
    """The identity the appliance of ``image`` reports (its name and inputs' hash)."""
    return f"{APPLIANCE_NAME} {image.stem.removeprefix('install-image-')}"
