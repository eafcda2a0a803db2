"""The test guests, proven with QEMU started by hand (no Corral): Debian's cloud
kernel with our busybox initramfs, and the disks the ``corral-tiny`` OS writes."""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from corral.paths import Paths
from tests.helpers import debian_guest, guest
from tests.helpers.guest_qemu import bare_guest, direct_boot_args, disk_args
from tests.helpers.tiny_os import MIN_DISK_MIB, make_tiny_os, run_tiny_os, tiny_os_env


def _disk(path: Path, mib: int = MIN_DISK_MIB) -> Path:
    with path.open("wb") as handle:
        handle.truncate(mib << 20)
    return path


def _sha256(path: Path) -> bytes:
    return hashlib.sha256(path.read_bytes()).digest()


def _read_fs(disk: Path, name: str) -> str:
    """A file of the tiny OS's file system (partition 1), read with debugfs."""
    out = subprocess.run(
        ["debugfs", "-R", f"cat {name}", f"{disk}?offset={1 << 20}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout


@pytest.fixture
def tiny_os(tmp_path: Path) -> Path:
    return make_tiny_os(Paths(tmp_path / "root"))


def test_assets_are_cached_by_content() -> None:
    kernel, initramfs = guest.guest_kernel(), guest.guest_initramfs()
    assert kernel.stat().st_size > 1 << 20
    with initramfs.open("rb") as handle:
        assert handle.read(2) == b"\x1f\x8b"  # gzip
    assert kernel.parent.parent == initramfs.parent == guest.CACHE
    # The name is the inputs' hash: the same inputs name the same file...
    guest.guest_initramfs.cache_clear()
    assert guest.guest_initramfs() == initramfs


def test_changed_init_rebuilds_initramfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    shutil.copytree(guest.DATA, data)
    with (data / "init").open("a") as init:
        init.write("# changed\n")
    before = guest.guest_initramfs()
    monkeypatch.setattr(guest, "DATA", data)
    guest.guest_initramfs.cache_clear()
    try:
        changed = guest.guest_initramfs()
        assert changed != before
        with gzip.open(changed) as archive:
            assert b"# changed\n" in archive.read()
        changed.unlink()
    finally:
        guest.guest_initramfs.cache_clear()


def test_concurrent_builds_leave_one_whole_copy(tmp_path: Path) -> None:
    final = tmp_path / "asset"
    builders = 4
    barrier = threading.Barrier(builders)  # all build at once, then all finish

    def build(index: int) -> None:
        with guest._building(final) as tmp:
            (tmp / "part1").write_text(f"{index}")
            barrier.wait()
            (tmp / "part2").write_text(f"{index}")

    with ThreadPoolExecutor(builders) as pool:
        list(pool.map(build, range(builders)))
    # One builder's whole output; the others' temporary directories are gone.
    assert [p.name for p in tmp_path.iterdir()] == ["asset"]
    assert (final / "part1").read_text() == (final / "part2").read_text()


async def test_boots_to_marker_and_counts(tmp_path: Path) -> None:
    args = direct_boot_args("corral.hostname=guest-a corral.counter=1")
    start = time.monotonic()
    async with bare_guest(tmp_path / "qemu", args) as vm:
        await vm.wait_line(r"^CORRAL-GUEST-UP guest-a$")
        print(f"\nboot to marker (TCG, direct kernel boot): {time.monotonic() - start:.2f} s")
        first = int((await vm.wait_line(r"^CORRAL-GUEST-COUNT (\d+)$"))[1])
        await vm.wait_line(rf"^CORRAL-GUEST-COUNT {first + 10}$")
        counts = [
            int(m[1]) for line in vm.lines if (m := re.match(r"^CORRAL-GUEST-COUNT (\d+)$", line))
        ]
        counted = counts[: counts.index(first + 10) + 1]
        # Counting up, one at a time; under load the kernel's own console
        # messages may garble a line, so a number may be missing, never repeated.
        assert counted == sorted(set(counted)) and counted[0] <= first
        assert len(counted) >= 9


async def test_acpi_power_button_powers_off(tmp_path: Path) -> None:
    async with bare_guest(tmp_path / "qemu", direct_boot_args("corral.hostname=g")) as vm:
        await vm.wait_line(r"^CORRAL-GUEST-READY g$")
        await vm.qmp.execute("system_powerdown")
        assert await vm.wait_exit() == 0
        assert "CORRAL-GUEST-ACPI-POWEROFF" in vm.lines
        assert "SHUTDOWN" in vm.event_names()


async def test_acpi_ignored_and_shell_on_console(tmp_path: Path) -> None:
    args = direct_boot_args("corral.acpi=ignore")
    async with bare_guest(tmp_path / "qemu", args) as vm:
        await vm.wait_line(r"^CORRAL-GUEST-SHELL$")
        await vm.type("echo hi-$((6 * 7))\n")
        await vm.wait_line(r"^hi-42$")
        await vm.qmp.execute("system_powerdown")
        # The guest's kernel counts the button's fixed ACPI event; then nothing happens.
        mark = len(vm.lines)
        await vm.type(
            "until grep -q '^ *[1-9]' /sys/firmware/acpi/interrupts/ff_pwr_btn;"
            " do usleep 50000; done; echo pressed-$((1 + 1))\n"
        )
        await vm.wait_line(r"^pressed-2$", after=mark)
        await vm.type("echo alive-$((2 + 2))\n")
        await vm.wait_line(r"^alive-4$", after=mark)
        status = await vm.qmp.execute("query-status")
        assert isinstance(status, dict) and status["status"] == "running"
        assert vm.proc.returncode is None
        assert "CORRAL-GUEST-ACPI-POWEROFF" not in vm.lines


async def test_guest_powers_itself_off(tmp_path: Path) -> None:
    async with bare_guest(tmp_path / "qemu", direct_boot_args("corral.poweroff=1")) as vm:
        assert await vm.wait_exit() == 0
        assert "CORRAL-GUEST-POWEROFF" in vm.lines
        # QMP says the guest shut itself down (how Ganeti's user_shutdown is told).
        (shutdown,) = [e for e in vm.events.history if e["event"] == "SHUTDOWN"]
        assert shutdown["data"] == {"guest": True, "reason": "guest-shutdown"}


@pytest.mark.slow
async def test_tiny_os_disk_boots_through_grub_and_counts_boots(
    tmp_path: Path, tiny_os: Path
) -> None:
    disk = _disk(tmp_path / "disk0")
    osparams = {"marker": "tiny-disk-1", "kernel_args": "corral.reboot=1"}
    code, tail = await run_tiny_os(tiny_os, "create", "inst1.example.com", disk,
                                   tmp_path / "create.log", osparams)  # fmt: skip
    assert code == 0, tail
    async with bare_guest(tmp_path / "qemu", disk_args(disk)) as vm:  # no -kernel: GRUB
        await vm.wait_line(r"^CORRAL-GUEST-UP inst1\.example\.com$")
        await vm.wait_line(r"^CORRAL-GUEST-DISK tiny-disk-1$")
        await vm.wait_line(r"^CORRAL-GUEST-BOOT 1$")
        mark = len(vm.lines)
        await vm.qmp.execute("system_reset")
        await vm.wait_line(r"^CORRAL-GUEST-BOOT 2$", after=mark)


async def test_tiny_os_disk_direct_kernel_boot(tmp_path: Path, tiny_os: Path) -> None:
    disk = _disk(tmp_path / "disk0")
    code, tail = await run_tiny_os(tiny_os, "create", "inst2", disk, tmp_path / "create.log")
    assert code == 0, tail
    args = [*direct_boot_args("root=/dev/vda1 corral.hostname=inst2"), *disk_args(disk)]
    async with bare_guest(tmp_path / "qemu", args) as vm:
        await vm.wait_line(r"^CORRAL-GUEST-DISK inst2$")  # the marker defaults to the name


async def test_tiny_os_scripts(tmp_path: Path, tiny_os: Path) -> None:
    disk = _disk(tmp_path / "disk0")
    log = tmp_path / "log"
    assert (await run_tiny_os(tiny_os, "create", "old", disk, log))[0] == 0
    assert _read_fs(disk, "/etc/hostname") == "old\n"

    old = {"OLD_INSTANCE_NAME": "old"}
    code, tail = await run_tiny_os(tiny_os, "rename", "new", disk, log, extra_env=old)
    assert code == 0, tail
    assert _read_fs(disk, "/etc/hostname") == "new\n"
    assert "corral.hostname=new " in _read_fs(disk, "/boot/grub/grub.cfg")

    # export (its size on EXP_SIZE_FD), then import onto a second disk: byte-identical.
    image, other = tmp_path / "stream.img", _disk(tmp_path / "disk1")
    read_size, write_size = os.pipe()
    env = tiny_os_env(tiny_os, "export", "new", disk) | {"EXP_SIZE_FD": str(write_size)}
    with image.open("wb") as out:
        subprocess.run(["./export"], cwd=tiny_os, env=env, stdout=out, check=True,
                       pass_fds=(write_size,))  # fmt: skip
    os.close(write_size)
    with os.fdopen(read_size) as size:
        assert int(size.read()) == disk.stat().st_size == image.stat().st_size
    with image.open("rb") as stream:
        subprocess.run(["./import"], cwd=tiny_os, env=tiny_os_env(tiny_os, "import", "new", other),
                       stdin=stream, check=True)  # fmt: skip
    assert _sha256(other) == _sha256(disk)


async def test_tiny_os_bad_input(tmp_path: Path, tiny_os: Path) -> None:
    small = _disk(tmp_path / "small", 8)
    code, tail = await run_tiny_os(tiny_os, "create", "x", small, tmp_path / "log")
    assert code != 0
    assert "disk 0" in tail and "needs at least" in tail
    assert small.read_bytes() == bytes(8 << 20)  # nothing written
    code, tail = await run_tiny_os(tiny_os, "verify", "x", small, tmp_path / "log2",
                                   {"kernel_args": "a\nb"})  # fmt: skip
    assert code != 0 and "kernel_args" in tail
    code, _ = await run_tiny_os(tiny_os, "verify", "x", small, tmp_path / "log3",
                                {"kernel_args": "corral.counter=1"})  # fmt: skip
    assert code == 0


@pytest.mark.slow
async def test_debian_guest_reaches_login_prompt(tmp_path: Path) -> None:
    # Debian's ganeti-instance-debootstrap, unmodified; minutes on the first run
    # (debootstrap from the mirror), then its cached tarball.
    disk = _disk(tmp_path / "debian.img", debian_guest.MIN_DISK_MIB)
    debian_guest.install_debian(disk, "debian1.example.com", tmp_path / "create.log")
    start = time.monotonic()
    async with bare_guest(tmp_path / "qemu", debian_guest.boot_args(disk)) as vm:
        await vm.wait_line(r"^debian1 login: $", prompt=True)
        print(f"\nDebian guest to login prompt (TCG): {time.monotonic() - start:.2f} s")
