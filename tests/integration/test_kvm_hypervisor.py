"""The kvm hypervisor with real QEMU guests (TCG), without noded: life cycle,
user shutdown, security models, faults at start."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import stat
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyroute2 import IPRoute  # type: ignore[import-untyped]

from corral import errors
from corral.node import netdev
from corral.node.hypervisor.kvm import KvmHypervisor
from corral.node.hypervisor.kvm.hypervisor import KVM_PATH_ENV
from corral.node.hypervisor.spec import STATE_PAUSED, STATE_RUNNING, STATE_SHUTDOWN, NicSpec
from corral.node.netrules import nft
from corral.node.uidpool import uid_has_process
from corral.paths import Paths
from tests.helpers.kvm_guest import (
    MARKER,
    booted,
    guest_spec,
    kvm_hypervisor,
    serial,
    unique_uid_pool,
)
from tests.helpers.kvm_guest import short_root as kvm_short_root
from tests.helpers.netns_thread import NamespaceThread
from tests.helpers.noded import free_port
from tests.helpers.rfb import VNC_AUTH, vnc_session
from tests.helpers.waiting import wait_until_async

# Uids of the pool tests: high enough that no process on the machine has them.
POOL = unique_uid_pool(2)


@pytest.fixture
def short_root() -> Iterator[Path]:
    with kvm_short_root("kvm") as root:
        yield root


@pytest.fixture
async def hv(short_root: Path) -> AsyncIterator[KvmHypervisor]:
    async with kvm_hypervisor(short_root) as hypervisor:
        yield hypervisor


def runs(pid: int) -> bool:
    """Whether ``pid`` runs (an exited QEMU stays a zombie until init reaps it)."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return stat_line[stat_line.rindex(b")") + 2 :].split()[0] not in (b"Z", b"X")


def uids(pid: int) -> list[int]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return [int(v) for v in line.split()[1:]]
    raise AssertionError("no Uid line")


async def info(hv: KvmHypervisor, name: str) -> tuple[str, int, int] | None:
    found = [i for i in await hv.instances_info() if i.name == name]
    return (found[0].state, found[0].memory, found[0].vcpus) if found else None


@pytest.mark.slow
async def test_boot_acpi_shutdown_and_private_files(hv: KvmHypervisor) -> None:
    spec = guest_spec("boot1", "corral.counter=1", memory=160)
    async with booted(hv, spec) as console:
        # The counter runs after acpid started: the power button is handled.
        await console.wait_for("CORRAL-GUEST-COUNT 1")
        assert await info(hv, "boot1") == (STATE_RUNNING, 160, 1)
        runtime = hv.layout.read_runtime("boot1")
        assert runtime is not None and runtime.argv[0] == spec.hvparams["kvm_path"]
        assert "-accel" in runtime.argv and runtime.argv[runtime.argv.index("-accel") + 1] == "tcg"
        for sub in ("", "ctrl", "conf", "pid"):
            mode = (hv.layout.base / sub).stat().st_mode
            assert stat.S_IMODE(mode) == 0o700, sub
        assert stat.S_ISSOCK(hv.layout.qmp("boot1").stat().st_mode)
        assert hv.serial_socket("boot1") == hv.layout.serial("boot1")

        await hv.monitors["boot1"].execute("stop")
        await wait_until_async(lambda: hv.monitors["boot1"].state == STATE_PAUSED)
        await hv.monitors["boot1"].execute("cont")
        await wait_until_async(lambda: hv.monitors["boot1"].state == STATE_RUNNING)

        await hv.stop("boot1", timeout=120)
        assert console.count("CORRAL-GUEST-ACPI-POWEROFF") == 1
    assert await info(hv, "boot1") is None
    assert not runs(runtime.pid)
    assert hv.layout.names() == [] and hv.serial_socket("boot1") is None
    assert not hv.layout.qmp("boot1").exists() and not hv.layout.serial("boot1").exists()
    # Stopping what is not running is no error.
    await hv.stop("boot1")


@pytest.mark.slow
async def test_soft_and_hard_reboot(hv: KvmHypervisor) -> None:
    spec = guest_spec("reboot1")
    async with booted(hv, spec) as console:
        pid = hv.monitors["reboot1"].pid
        resets = hv.monitors["reboot1"].resets
        await hv.reboot(spec, "soft", 60)
        first = await console.wait_for(MARKER)
        await console.wait_for(MARKER, start=first + 1)
        assert hv.monitors["reboot1"].resets > resets  # seen through QMP's RESET
        assert hv.monitors["reboot1"].pid == pid  # the same QEMU, reset
        await hv.reboot(spec, "hard", 5)
        new = hv.monitors["reboot1"]
        assert new.pid != pid and not runs(pid)
        assert await info(hv, "reboot1") is not None


@pytest.mark.slow
async def test_guest_poweroff_is_a_user_shutdown(hv: KvmHypervisor) -> None:
    spec = guest_spec("userdown1", "corral.poweroff=1")
    await hv.start(spec, paused=True)
    async with serial(hv.layout.serial("userdown1")) as console:
        pid = hv.monitors["userdown1"].pid
        await hv.monitors["userdown1"].execute("cont")
        await console.wait_for("CORRAL-GUEST-POWEROFF")
    # Noticed without anyone asking: the exit was followed through its pidfd.
    await wait_until_async(lambda: hv.layout.names() == [], timeout=30)
    assert await info(hv, "userdown1") == (STATE_SHUTDOWN, 0, 0)
    assert not runs(pid) and hv.layout.names() == []
    # Reported until stopped (or started) through Corral.
    await hv.stop("userdown1")
    assert await info(hv, "userdown1") is None


@pytest.mark.slow
async def test_guest_ignoring_acpi_is_hard_stopped(hv: KvmHypervisor) -> None:
    spec = guest_spec("deaf1", "corral.acpi=ignore corral.counter=1")
    async with booted(hv, spec) as console:
        await console.wait_for("CORRAL-GUEST-COUNT 1")
        pid = hv.monitors["deaf1"].pid
        await hv.stop("deaf1", timeout=2)
        assert console.count("CORRAL-GUEST-ACPI-POWEROFF") == 0
        assert not runs(pid)
        assert await info(hv, "deaf1") is None  # stopped by Corral: no user shutdown


@pytest.mark.slow
async def test_pool_gives_each_guest_its_uid(hv: KvmHypervisor, tmp_path: Path) -> None:
    ssconf = hv.paths.ssconf_file("uid_pool")
    ssconf.parent.mkdir(parents=True, exist_ok=True)
    ssconf.write_text(f"{POOL[0]}-{POOL[1]}\n")
    pool: dict[str, Any] = {"security_model": "pool"}
    specs = [guest_spec(f"pool{i}", **pool) for i in range(3)]
    async with booted(hv, specs[0]), booted(hv, specs[1]):
        got = sorted(uids(hv.monitors[s.name].pid)[0] for s in specs[:2])
        assert got == list(POOL)
        for s in specs[:2]:
            runtime = hv.layout.read_runtime(s.name)
            assert runtime is not None
            assert set(uids(hv.monitors[s.name].pid)) == {runtime.uid}
        with pytest.raises(errors.LockError, match="No free uid left"):
            await hv.start(specs[2])
        assert "pool2" not in hv.monitors and hv.layout.read_runtime("pool2") is None
    # Released at stop: the pool serves again (once init has reaped the
    # exited QEMUs: the pool counts a zombie's uid as taken).
    await wait_until_async(lambda: not any(map(uid_has_process, POOL)), timeout=30)
    async with booted(hv, specs[2]):
        assert uids(hv.monitors["pool2"].pid)[0] in POOL


@pytest.mark.slow
async def test_chroot_and_user(hv: KvmHypervisor) -> None:
    spec = guest_spec("jail1", use_chroot=True, security_model="user", security_domain="nobody")
    # What a guest that died left in its chroot goes before the next start.
    hv.layout.ensure()
    hv.layout.chroot("jail1").mkdir()
    (hv.layout.chroot("jail1") / "leftover").write_text("x")
    async with booted(hv, spec):
        pid = hv.monitors["jail1"].pid
        root = Path(os.readlink(f"/proc/{pid}/root"))
        assert root == hv.layout.chroot("jail1") and list(root.iterdir()) == []
        assert uids(pid) == [65534] * 4
    assert not hv.layout.chroot("jail1").exists()


async def test_qemu_missing(hv: KvmHypervisor, monkeypatch: pytest.MonkeyPatch) -> None:
    assert KvmHypervisor.problem(hv.paths) is None
    monkeypatch.setenv(KVM_PATH_ENV, "/nonexistent/qemu")
    assert "kvm is not offered" in str(KvmHypervisor.problem(hv.paths))
    with pytest.raises(errors.OpExecError, match="QEMU binary '/nonexistent/kvm'"):
        await hv.start(guest_spec("noqemu", kvm_path="/nonexistent/kvm"))
    assert hv.layout.names() == []


async def test_rules_without_nft_refuse_the_start(
    hv: KvmHypervisor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A guest that needs network rules does not start on a node without nft
    (never without its rules); nothing of it is left, no uid stays taken."""
    monkeypatch.setenv(nft.NFT_ENV, "/nonexistent/nft")
    spec = guest_spec("nonft", security_model="user", security_domain="nobody",
                      use_network_rules=True)  # fmt: skip
    with pytest.raises(errors.OpExecError, match=r"no nft \(install Debian's nftables"):
        await hv.start(spec)
    assert hv.layout.names() == [] and "nonft" not in hv.monitors
    assert hv.netrules.uid_of("nonft") is None


async def test_kernel_path_missing(hv: KvmHypervisor) -> None:
    with pytest.raises(errors.OpExecError, match="kernel_path '/nonexistent/vmlinuz' does not"):
        await hv.start(guest_spec("nokernel", kernel_path="/nonexistent/vmlinuz"))
    assert hv.layout.names() == [] and await hv.instances_info() == []


async def test_qemu_exiting_at_start_reports_its_stderr(hv: KvmHypervisor) -> None:
    spec = guest_spec("badarg", kvm_extra="-device no-such-device-model")
    with pytest.raises(errors.OpExecError) as err:
        await hv.start(spec)
    assert "QEMU exited with code 1" in str(err.value)
    assert "'no-such-device-model' is not a valid device model name" in str(err.value)
    assert hv.layout.names() == [] and await hv.instances_info() == []


async def test_vnc_password_file_missing(hv: KvmHypervisor, tmp_path: Path) -> None:
    spec = guest_spec(
        "vnc1", vnc_bind_address="127.0.0.1", vnc_password_file=str(tmp_path / "nope")
    )
    with pytest.raises(errors.OpExecError, match="cannot read the VNC password file"):
        await hv.start(spec)
    assert hv.layout.names() == []


async def test_already_running_is_refused(hv: KvmHypervisor) -> None:
    spec = guest_spec("twice")
    await hv.start(spec, paused=True)
    with pytest.raises(errors.OpExecError, match="already running"):
        await hv.start(spec)
    assert await info(hv, "twice") == (STATE_PAUSED, 128, 1)


async def test_socket_path_too_long(tmp_path: Path) -> None:
    hv = KvmHypervisor(Paths(tmp_path / ("x" * 60)))
    with pytest.raises(errors.OpExecError, match="unix sockets allow 107"):
        await hv.start(guest_spec("long-name-" * 3))
    assert hv.layout.names() == []


_NODED_STAND_IN = """
import asyncio, sys
from pathlib import Path
from corral.node.hypervisor.kvm import KvmHypervisor
from corral.paths import Paths
from tests.helpers.kvm_guest import guest_spec

async def main():
    hv = KvmHypervisor(Paths(Path(sys.argv[1])))
    await hv.resume()
    for name in sys.argv[2:]:
        await hv.start(guest_spec(name, "corral.counter=1"))
    print("started", flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


@pytest.mark.slow
async def test_restarted_noded_finds_its_guests(short_root: Path) -> None:
    """A process holding the guests (as noded) is killed with SIGKILL; a new
    one takes up the guest that runs and cleans up after the one that died."""
    repo = Path(__file__).resolve().parents[2]
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _NODED_STAND_IN, str(short_root), "live1", "dead1",
        cwd=repo, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert holder.stdout is not None
        assert await asyncio.wait_for(holder.stdout.readline(), 120) == b"started\n"
    finally:
        holder.kill()
        await holder.wait()
    hv = KvmHypervisor(Paths(short_root))
    live, dead = hv.layout.read_runtime("live1"), hv.layout.read_runtime("dead1")
    assert live is not None and dead is not None
    os.kill(dead.pid, signal.SIGKILL)
    await wait_until_async(lambda: not runs(dead.pid), timeout=30)
    await hv.resume()
    try:
        assert [i.name for i in await hv.instances_info()] == ["live1"]
        assert hv.monitors["live1"].pid == live.pid and runs(live.pid)
        assert hv.layout.names() == ["live1"] and not hv.layout.qmp("dead1").exists()
        async with serial(hv.layout.serial("live1")) as console:
            seen = await console.wait_for("CORRAL-GUEST-COUNT")
            await console.wait_for("CORRAL-GUEST-COUNT", start=seen + 1)  # it still runs
            assert await hv.monitors["live1"].execute("query-status") == {
                "status": "running", "singlestep": False, "running": True,
            }  # fmt: skip
            await hv.stop("live1", timeout=120)
            assert console.count("CORRAL-GUEST-ACPI-POWEROFF") == 1
        assert not runs(live.pid) and hv.layout.names() == []
    finally:
        for name in list(hv.monitors):
            await hv.stop(name, force=True)
        await hv.close()


def _bridge(name: str) -> None:
    with IPRoute() as ipr:
        ipr.link("add", ifname=name, kind="bridge")


def _master_of(tap: str) -> str | None:
    """The bridge ``tap`` is in; None if the tap does not exist."""
    with IPRoute() as ipr:
        found = ipr.link_lookup(ifname=tap)
        if not found:
            return None
        master = ipr.get_links(found[0])[0].get_attr("IFLA_MASTER")
        return str(ipr.get_links(master)[0].get_attr("IFLA_IFNAME")) if master else ""


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_bridged_nic_with_its_mac(short_root: Path) -> None:
    """The guest sees its NIC with the configured MAC; the tap is in the
    bridge while the guest runs and gone after the stop.  All inside a
    network namespace of the test's own (the event loop runs in it)."""
    mac = "aa:00:00:5e:11:22"
    spec = dataclasses.replace(
        guest_spec("nic1"), nics=(NicSpec(0, "nic-uuid", mac, "bridged", "br0"),)
    )
    tap = netdev.tap_name(spec.uuid, 0, str(short_root))

    async def scenario() -> tuple[str | None, str | None]:
        hv = KvmHypervisor(Paths(short_root))
        async with booted(hv, spec) as console:
            await console.wait_for("CORRAL-GUEST-SHELL")
            await console.send("cat /sys/class/net/eth0/address\n")
            await console.wait_for(f"{mac}", start=len(console.lines))
            # pyroute2 runs a loop of its own: not on this running one.
            during = await asyncio.to_thread(_master_of, tap)
        await hv.close()
        return during, await asyncio.to_thread(_master_of, tap)

    with NamespaceThread() as ns:
        ns.call(_bridge, "br0")
        during, after = ns.call(asyncio.run, scenario())
    assert (during, after) == ("br0", None)


async def test_unknown_security_domain(hv: KvmHypervisor) -> None:
    spec = guest_spec("baduser", security_model="user", security_domain="no-such-user-x")
    with pytest.raises(errors.OpExecError, match="Unknown user 'no-such-user-x'"):
        await hv.start(spec)
    assert hv.layout.names() == [] and await hv.instances_info() == []


async def _vnc_login(port: int, password: str) -> int:
    """The RFB SecurityResult of logging in with ``password`` (0: accepted)."""
    async with vnc_session("127.0.0.1", port, password) as session:
        assert session.types == [VNC_AUTH]  # VNC authentication only
        return session.result


async def test_vnc_on_loopback_with_its_password(hv: KvmHypervisor, short_root: Path) -> None:
    """VNC listens on the bind address at the instance's network port and
    takes the password from the file, no other."""
    password_file = short_root / "vnc-pw"
    password_file.write_text("s3cret\n")
    port = free_port("127.0.0.1")
    base = guest_spec("vnc2", vnc_bind_address="127.0.0.1", vnc_password_file=str(password_file))
    spec = dataclasses.replace(base, wire={**base.wire, "network_port": port})
    await hv.start(spec, paused=True)
    assert await _vnc_login(port, "wrong") == 1
    assert await _vnc_login(port, "s3cret") == 0
    console = await hv.console(spec, "node1")
    assert console.kind == "ssh"  # the serial console comes first, as in Ganeti
