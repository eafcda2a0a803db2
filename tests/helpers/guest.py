"""Bootable test guests: Debian's cloud kernel and a busybox initramfs.

Everything comes from Debian's packages (``apt-get download`` + ``dpkg-deb
-x``) and is cached in ``.cache/guest/`` under a hash of its inputs, so a new
package version or a changed init script rebuilds it.  Builds happen in a
temporary directory renamed into place: concurrent test processes never see
(or leave) a half-built asset.  What the guest does is chosen on the kernel
command line: see tests/data/guest/init.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "guest"
DATA = REPO / "tests" / "data" / "guest"

KERNEL_META = "linux-image-cloud-amd64"
BUSYBOX_PKG = "busybox-static"
GRUB_PKG = "grub-pc-bin"  # GRUB's BIOS images and modules
GRUB_TOOLS_PKG = "grub-common"  # grub-mkimage
# The cloud kernel builds these as modules; their dependencies come from modules.dep.
GUEST_MODULES = ("virtio_pci", "virtio_blk", "virtio_net", "virtio_balloon", "evdev", "button")
# Shipped too, loaded only with corral.cdrom=1 (IDE probing costs every boot
# ~0.5 s under TCG): the guest reads and mounts a CD-ROM (a config drive).
CDROM_MODULES = ("ata_piix", "sr_mod", "isofs")
# Bump when the way assets are built changes (the inputs' hash covers the rest).
BUILD_VERSION = "1"


@dataclass(frozen=True)
class Package:
    """One Debian package as apt's index describes it."""

    name: str
    version: str
    sha256: str


# Looked up together: each apt-cache run parses all of apt's lists (~0.7 s here).
KNOWN_PACKAGES = (KERNEL_META, BUSYBOX_PKG, GRUB_PKG, GRUB_TOOLS_PKG)


@functools.cache
def _apt_index(names: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """``apt-cache show`` of the candidate versions: package → its fields."""
    out = subprocess.run(
        ["apt-cache", "show", "--no-all-versions", *names],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    index: dict[str, dict[str, str]] = {}
    for paragraph in out.stdout.split("\n\n"):
        fields = {}
        for line in paragraph.splitlines():
            key, sep, value = line.partition(": ")
            if sep and not line.startswith(" "):
                fields[key] = value
        if "Package" in fields:
            index[fields["Package"]] = fields
    missing = set(names) - set(index)
    if missing:
        raise RuntimeError(f"apt-cache knows no package {sorted(missing)}: {out.stderr.strip()}")
    return index


def _fields(name: str) -> dict[str, str]:
    return _apt_index(KNOWN_PACKAGES if name in KNOWN_PACKAGES else (name,))[name]


def package(name: str) -> Package:
    """The candidate version of ``name`` (apt's local index, no download)."""
    fields = _fields(name)
    return Package(name, fields["Version"], fields["SHA256"])


def kernel_package() -> Package:
    """The kernel image package the cloud kernel metapackage depends on."""
    return package(_fields(KERNEL_META)["Depends"].split(",")[0].split()[0])


def _key(*parts: str) -> str:
    return hashlib.sha256("\0".join((BUILD_VERSION, *parts)).encode()).hexdigest()[:16]


def _readable(top: Path) -> None:
    top.chmod(0o755)
    for path in top.rglob("*"):
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o444 | (0o111 if path.is_dir() else 0))


@contextmanager
def _building(final: Path) -> Iterator[Path]:
    """A temporary directory next to ``final`` that becomes ``final`` on success."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        yield tmp
        _readable(tmp)  # QEMU may run as another user (security_model)
        try:
            tmp.rename(final)
        except OSError:
            if not final.is_dir():  # not just another process that finished first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def fetch_deb(pkg: Package) -> Path:
    """The package's .deb, downloaded once with ``apt-get download``."""
    final = CACHE / "debs" / f"{pkg.name}-{pkg.sha256[:16]}"
    if not final.is_dir():
        with _building(final) as tmp:
            out = subprocess.run(
                ["apt-get", "download", "-q", f"{pkg.name}={pkg.version}"],
                cwd=tmp, capture_output=True, text=True, check=False,
            )  # fmt: skip
            if out.returncode != 0:
                raise RuntimeError(f"apt-get download {pkg.name} failed: {out.stderr.strip()}")
            (deb,) = tmp.glob("*.deb")
            if hashlib.sha256(deb.read_bytes()).hexdigest() != pkg.sha256:
                raise RuntimeError(f"{deb.name}: checksum differs from apt's index")
            deb.rename(tmp / "package.deb")
    return final / "package.deb"


def unpack(pkg: Package) -> Path:
    """The package's files (``dpkg-deb -x``), unpacked once."""
    final = CACHE / "unpacked" / f"{pkg.name}-{pkg.sha256[:16]}"
    if not final.is_dir():
        deb = fetch_deb(pkg)
        with _building(final) as tmp:
            subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp)], check=True)
    return final


@dataclass(frozen=True)
class GuestKernel:
    """The cloud kernel and the modules the guests load, dependencies first."""

    vmlinuz: Path
    version: str
    modules_dir: Path  # holds the files named by ``modules`` and ``cdrom_modules``
    modules: tuple[str, ...]  # paths relative to /lib/modules/<version>/
    cdrom_modules: tuple[str, ...] = ()  # loaded after ``modules``, on request


def _load_order(deps: dict[str, list[str]], wanted: list[str]) -> list[str]:
    """``wanted`` and everything they need, each after its dependencies."""
    order: list[str] = []

    def visit(module: str) -> None:
        if module in order:
            return
        for dep in deps[module]:
            visit(dep)
        order.append(module)

    for module in wanted:
        visit(module)
    return order


def _modules_dep(unpacked: Path, version: str) -> dict[str, list[str]]:
    """modules.dep, from busybox's depmod: Debian's package ships none (its
    postinst runs depmod) and kmod need not be installed here.  ``-n`` prints
    the files instead of writing them into the shared unpacked tree."""
    out = subprocess.run(
        [str(busybox()), "depmod", "-n", "-b", str(unpacked), version],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    deps: dict[str, list[str]] = {}
    for line in out.stdout.splitlines():
        module, sep, rest = line.partition(": ")
        if sep and module.endswith(".ko"):  # the modules.dep part of the output
            deps[module] = rest.split()
        elif line.endswith(".ko:"):
            deps[line[:-1]] = []
    return deps


@functools.cache
def guest_kernel_files() -> GuestKernel:
    """The cloud kernel (vmlinuz) and the guest's modules, cached."""
    pkg = kernel_package()
    final = CACHE / f"kernel-{_key(pkg.sha256, *GUEST_MODULES, '+', *CDROM_MODULES)}"
    if not final.is_dir():
        unpacked = unpack(pkg)
        (version,) = (p.name for p in (unpacked / "lib" / "modules").iterdir())
        deps = _modules_dep(unpacked, version)
        by_name = {Path(path).name.removesuffix(".ko"): path for path in deps}
        order = _load_order(deps, [by_name[name] for name in GUEST_MODULES])
        everything = _load_order(deps, [by_name[n] for n in GUEST_MODULES + CDROM_MODULES])
        cdrom = [module for module in everything if module not in order]
        with _building(final) as tmp:
            shutil.copy2(unpacked / "boot" / f"vmlinuz-{version}", tmp / "vmlinuz")
            for module in everything:
                target = tmp / "modules" / module
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(unpacked / "lib" / "modules" / version / module, target)
            (tmp / "modules.order").write_text("".join(m + "\n" for m in order))
            (tmp / "cdrom.order").write_text("".join(m + "\n" for m in cdrom))
            (tmp / "version").write_text(version + "\n")
    return GuestKernel(
        vmlinuz=final / "vmlinuz",
        version=(final / "version").read_text().strip(),
        modules_dir=final / "modules",
        modules=tuple((final / "modules.order").read_text().split()),
        cdrom_modules=tuple((final / "cdrom.order").read_text().split()),
    )


def guest_kernel() -> Path:
    """Debian's cloud kernel for direct kernel boot (``-kernel``)."""
    return guest_kernel_files().vmlinuz


def busybox() -> Path:
    """Debian's static busybox binary."""
    return unpack(package(BUSYBOX_PKG)) / "bin" / "busybox"


@functools.cache
def busybox_applets() -> tuple[str, ...]:
    """Where busybox's applets live (``sbin/acpid``, ``bin/sh``, ...)."""
    out = subprocess.run([str(busybox()), "--list-full"], capture_output=True, text=True)
    return tuple(sorted(out.stdout.split()))


class Cpio:
    """An archive in the "newc" format the kernel unpacks as its initramfs."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._inode = 0
        self._dirs: set[str] = set()

    def _entry(
        self, name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0)
    ) -> None:
        self._inode += 1
        fields = (self._inode, mode, 0, 0, 1, 0, len(data), 0, 0, *rdev, len(name) + 1, 0)
        header = b"070701" + b"".join(b"%08X" % field for field in fields)
        self._parts += [header, name.encode(), b"\0", _pad(len(header) + len(name) + 1)]
        self._parts += [data, _pad(len(data))]

    def directory(self, name: str) -> None:
        """``name`` and its parents, each once."""
        parts = name.split("/")
        for depth in range(1, len(parts) + 1):
            path = "/".join(parts[:depth])
            if path not in self._dirs:
                self._dirs.add(path)
                self._entry(path, 0o040755)

    def file(self, name: str, data: bytes, perm: int = 0o644) -> None:
        """A regular file (its directory is made first)."""
        self.directory(name.rpartition("/")[0])
        self._entry(name, 0o100000 | perm, data)

    def symlink(self, name: str, target: str) -> None:
        self.directory(name.rpartition("/")[0])
        self._entry(name, 0o120777, target.encode())

    def char_device(self, name: str, major: int, minor: int) -> None:
        self.directory(name.rpartition("/")[0])
        self._entry(name, 0o020600, rdev=(major, minor))

    def finish(self) -> bytes:
        """The archive, with its trailer."""
        self._entry("TRAILER!!!", 0)
        return b"".join(self._parts)


def _pad(length: int) -> bytes:
    return b"\0" * (-length % 4)


def _initramfs_bytes(kernel: GuestKernel) -> bytes:
    archive = Cpio()
    for empty in ("proc", "sys", "dev", "tmp", "mnt/disk", "root"):
        archive.directory(empty)
    # The kernel opens /dev/console for /init's output before devtmpfs is mounted.
    archive.char_device("dev/console", 5, 1)
    archive.file("init", (DATA / "init").read_bytes(), 0o755)
    archive.file("bin/busybox", busybox().read_bytes(), 0o755)
    for applet in busybox_applets():
        if applet != "bin/busybox":
            archive.symlink(applet, "/bin/busybox")
    archive.file("etc/acpi/PWRF/00000080", (DATA / "acpi-power-button").read_bytes(), 0o755)
    for listing, modules in (("", kernel.modules), ("-cdrom", kernel.cdrom_modules)):
        order = "".join(f"{kernel.version}/{module}\n" for module in modules)
        archive.file(f"etc/corral-modules{listing}", order.encode())
    for module in kernel.modules + kernel.cdrom_modules:
        data = (kernel.modules_dir / module).read_bytes()
        archive.file(f"lib/modules/{kernel.version}/{module}", data)
    return gzip.compress(archive.finish(), compresslevel=6, mtime=0)


@functools.cache
def guest_initramfs() -> Path:
    """The busybox initramfs (gzipped newc cpio) that every test guest boots."""
    kernel = guest_kernel_files()
    inputs = [p.read_bytes() for p in sorted(DATA.glob("*")) if p.is_file()]
    digest = hashlib.sha256(b"".join(hashlib.sha256(i).digest() for i in inputs)).hexdigest()
    key = _key(str(kernel.vmlinuz.parent.name), package(BUSYBOX_PKG).sha256, digest)
    final = CACHE / f"initramfs-{key}.img"
    if not final.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".initramfs-", dir=CACHE)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(_initramfs_bytes(kernel))
            os.chmod(tmp, 0o644)
            os.replace(tmp, final)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return final


# The tiny OS's disks: an MBR with GRUB's boot.img, GRUB's core.img in the
# sectors before the first partition (at 1 MiB), ext2 in partition 1.
BOOT_AREA_BYTES = 1 << 20
_MBR_CODE_BYTES = 440  # boot code; the disk signature and partition table follow
# core.img reads the rest of GRUB from here: the first partition, /boot/grub/grub.cfg.
GRUB_PREFIX = "(hd0,msdos1)/boot/grub"
GRUB_MODULES = ("biosdisk", "part_msdos", "ext2", "normal", "linux", "boot", "echo")


@functools.cache
def grub_boot_area() -> Path:
    """The first MiB of a bootable tiny-OS disk (partition table left empty).

    grub-bios-setup's work done by hand, as it needs no device: boot.img's
    code in the MBR already reads core.img from sector 1 (its default), and
    core.img as grub-mkimage writes it expects to sit right there.
    """
    grub, tools = package(GRUB_PKG), package(GRUB_TOOLS_PKG)
    final = CACHE / f"grub-{_key(grub.sha256, tools.sha256, GRUB_PREFIX, *GRUB_MODULES)}.img"
    if final.is_file():
        return final
    images = unpack(grub) / "usr" / "lib" / "grub" / "i386-pc"
    mkimage = unpack(tools) / "usr" / "bin" / "grub-mkimage"
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        core = Path(tmp) / "core.img"
        subprocess.run(
            [str(mkimage), "-d", str(images), "-O", "i386-pc", "-o", str(core),
             "-p", GRUB_PREFIX, *GRUB_MODULES],
            check=True, capture_output=True,
        )  # fmt: skip
        area = bytearray(BOOT_AREA_BYTES)
        area[:_MBR_CODE_BYTES] = (images / "boot.img").read_bytes()[:_MBR_CODE_BYTES]
        code = core.read_bytes()
        if len(code) > BOOT_AREA_BYTES - 512:
            raise RuntimeError(f"GRUB's core.img ({len(code)} bytes) does not fit before 1 MiB")
        area[512 : 512 + len(code)] = code
        staged = Path(tmp) / "area.img"
        staged.write_bytes(area)
        staged.chmod(0o644)
        os.replace(staged, final)
    return final
