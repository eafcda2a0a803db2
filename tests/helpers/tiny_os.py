"""``corral-tiny``: an OS definition (API 20) that writes a bootable disk in seconds.

Its ``create`` puts GRUB in the first MiB and an ext2 file system (made by
``mke2fs -d``, no mounts) in partition 1 with the cloud kernel, the test
initramfs, busybox and the modules.  The guest boots from that disk either
through GRUB (no ``kernel_path``) or by direct kernel boot (``kernel_path`` and
``initrd_path`` from tests/helpers/guest.py; ``root_path`` /dev/vda1, Ganeti's
default, or /dev/vda: the guest looks for its disk in both).
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from corral.osdef.definition import load_os
from corral.osdef.env import disk_transfer_env, instance_env
from corral.osdef.runner import run_script
from corral.osdef.spec import OsSpec
from corral.paths import Paths
from tests.helpers import guest
from tests.helpers.osdef import make_os

TINY_OS = "corral-tiny"
SCRIPTS_DIR = guest.DATA / "tiny-os"
PARAMETERS = {
    "marker": "What the guest prints from its disk (default: the instance name)",
    "kernel_args": "Extra kernel arguments when booting through GRUB (e.g. corral.counter=1)",
}
# The disk's files need ~20 MiB; this leaves room.
MIN_DISK_MIB = 64


def _place(source: Path, target: Path) -> None:
    """``target`` with ``source``'s content: a hard link where possible."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def make_tiny_os(paths: Paths, name: str = TINY_OS) -> Path:
    """The ``corral-tiny`` OS definition in the root's first OS directory."""
    kernel = guest.guest_kernel_files()
    scripts = {
        script: (SCRIPTS_DIR / script).read_text()
        for script in ("create", "export", "import", "rename", "verify")
    }
    os_dir = make_os(paths, name, parameters=PARAMETERS, scripts=scripts)
    shutil.copy2(SCRIPTS_DIR / "common.sh", os_dir / "common.sh")
    _place(guest.grub_boot_area(), os_dir / "boot-area.img")
    files = os_dir / "files"
    _place(kernel.vmlinuz, files / "boot" / "vmlinuz")
    _place(guest.guest_initramfs(), files / "boot" / "initrd.img")
    _place(guest.busybox(), files / "bin" / "busybox")
    for module in kernel.modules:
        _place(kernel.modules_dir / module, files / "lib" / "modules" / kernel.version / module)
    return os_dir


def tiny_os_env(
    os_dir: Path, script: str, instance: str, disk: Path, osparams: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment noded gives ``script`` (OS API 20) for an instance with
    one file disk."""
    osdef = load_os(os_dir)
    inst = {
        "name": instance, "os": f"{osdef.name}+default", "uuid": str(uuid.uuid4()),
        "ctime": 0, "mtime": 0, "primary_node": "node1", "hypervisor": "kvm",
        "disks": [{"uuid": str(uuid.uuid4()), "size": disk.stat().st_size >> 20,
                   "path": str(disk), "backend_type": "file"}],
        "nics": [],
    }  # fmt: skip
    env = instance_env(osdef, inst, OsSpec.public(f"{osdef.name}+default", osparams or {}))
    if script in ("export", "import"):
        env = disk_transfer_env(env, script, 0, str(disk))
    return env


async def run_tiny_os(
    os_dir: Path,
    script: str,
    instance: str,
    disk: Path,
    log: Path,
    osparams: dict[str, str] | None = None,
    extra_env: dict[str, str] | None = None,
) -> tuple[int, str]:
    """Run one of the OS's scripts as noded does (Corral's runner, the API 20
    environment); ``(exit code, log tail)``."""
    env = tiny_os_env(os_dir, script, instance, disk, osparams) | (extra_env or {})
    return await run_script(load_os(os_dir), script, [], env, log)
