"""A Debian guest installed by Debian's ``ganeti-instance-debootstrap``, unmodified.

Its scripts (unpacked with ``dpkg-deb -x``, not installed) run with the OS API
20 environment Corral gives OS scripts plus the package's own settings
(``SUITE``, ``PARTITION_STYLE=none``, ``MIRROR`` read from apt's sources here,
``VARIANTS_DIR`` into the unpacked package).  Two things the package fixes in
place are redirected without changing it: ``debootstrap`` itself comes from its
unpacked package (``PATH``, ``DEBOOTSTRAP_DIR``), and the package's tarball
cache, hard-wired to /var/cache/ganeti-instance-debootstrap, is
``.cache/guest/debootstrap/`` bind-mounted on /var/cache in a private mount
namespace of the script alone.  The guest boots with the cloud kernel and the
test initramfs (``corral.boot=root``), which switches to the disk's systemd.
"""

from __future__ import annotations

import re
import subprocess
import uuid
from pathlib import Path

from corral.osdef.definition import OSDefinition
from corral.osdef.env import instance_env
from corral.osdef.spec import OsSpec
from tests.helpers import guest

OS_PKG = "ganeti-instance-debootstrap"
DEBOOTSTRAP_PKG = "debootstrap"
SUITE = "bookworm"
MIN_DISK_MIB = 1024  # the package wants 511 MiB at least; a base system takes ~400
CACHE_ROOT = guest.CACHE / "debootstrap"  # stands for /var/cache in the namespace
SOURCES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))


def debian_mirror() -> str:
    """The Debian mirror apt uses here (for SUITE, component main)."""
    files: list[Path] = []
    for source in SOURCES:
        files += sorted(source.glob("*")) if source.is_dir() else [source]
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        # deb822 (.sources): a stanza with URIs, Suites and Components.
        for stanza in re.split(r"\n\s*\n", text):
            fields: dict[str, str] = dict(re.findall(r"^(\w[\w-]*):\s*(.*)$", stanza, re.M))
            if (
                SUITE in fields.get("Suites", "").split()
                and "main" in fields.get("Components", "").split()
            ):
                return fields["URIs"].split()[0]
        # one-line style: deb URI SUITE COMPONENTS...
        for match in re.finditer(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)\s+(.*)$", text, re.M):
            if match[2] == SUITE and "main" in match[3].split():
                return match[1]
    raise RuntimeError(f"apt has no source for Debian {SUITE} main here")


def os_dir() -> Path:
    """The unpacked OS definition (/usr/share/ganeti/os/debootstrap)."""
    return guest.unpack(guest.package(OS_PKG)) / "usr" / "share" / "ganeti" / "os" / "debootstrap"


def create_env(disk: Path, instance: str) -> dict[str, str]:
    """The ``create`` script's environment for one instance with one file disk."""
    package = guest.unpack(guest.package(OS_PKG))
    debootstrap = guest.unpack(guest.package(DEBOOTSTRAP_PKG))
    osdef = OSDefinition("debootstrap", os_dir(), [20], ["default"])
    inst = {
        "name": instance, "os": "debootstrap+default", "uuid": str(uuid.uuid4()),
        "ctime": 0, "mtime": 0, "primary_node": "node1", "hypervisor": "kvm",
        "disks": [{"uuid": str(uuid.uuid4()), "size": disk.stat().st_size >> 20,
                   "path": str(disk), "backend_type": "file"}],
        "nics": [], "hvparams": {"serial_console": True},
    }  # fmt: skip
    env = instance_env(osdef, inst, OsSpec.public("debootstrap+default", {}))
    env.update(
        SUITE=SUITE,
        PARTITION_STYLE="none",
        MIRROR=debian_mirror(),
        VARIANTS_DIR=str(package / "etc" / "ganeti" / "instance-debootstrap" / "variants"),
        DEBOOTSTRAP_DIR=str(debootstrap / "usr" / "share" / "debootstrap"),
        PATH=f"{debootstrap / 'usr' / 'sbin'}:{env['PATH']}",
    )
    return env


def install_debian(disk: Path, instance: str, log: Path) -> None:
    """Run the package's ``create`` on ``disk`` (a file of MIN_DISK_MIB or more).

    The first run debootstraps from the mirror (minutes) and leaves the
    package's tarball in CACHE_ROOT; later runs unpack that.
    """
    (CACHE_ROOT / "ganeti-instance-debootstrap").mkdir(parents=True, exist_ok=True)
    # In the namespace /var/cache is ours; the script's own steps are unchanged.
    command = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount --bind "$0" /var/cache && exec ./create', str(CACHE_ROOT)]  # fmt: skip
    try:
        with log.open("wb") as out:
            result = subprocess.run(command, cwd=os_dir(), env=create_env(disk, instance),
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=out)  # fmt: skip
    finally:
        _detach_loops(disk)
    if result.returncode != 0:
        raise AssertionError(f"create failed ({result.returncode}): {log.read_text()[-3000:]}")


def _detach_loops(disk: Path) -> None:
    """The script detaches its loop device; if it died halfway, we do."""
    out = subprocess.run(["losetup", "-n", "-O", "NAME", "-j", str(disk)],
                         capture_output=True, text=True, check=False)  # fmt: skip
    for device in out.stdout.split():
        subprocess.run(["losetup", "-d", device], check=False)


def boot_args(disk: Path) -> list[str]:
    """QEMU arguments booting the installed disk (whole-disk ext4 on /dev/vda)."""
    return [
        "-kernel", str(guest.guest_kernel()), "-initrd", str(guest.guest_initramfs()),
        "-append", "console=ttyS0 root=/dev/vda ro corral.boot=root",
        "-drive", f"file={disk},format=raw,if=virtio",
    ]  # fmt: skip
