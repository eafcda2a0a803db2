"""Live migration between two kvm hypervisors (two node roots on loopback,
each with its certificate under one cluster CA), driven step by step as the
master drives them; real QEMU guests under TCG, real TLS."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from corral import constants as C
from corral import errors
from corral.crypto import certs
from corral.node.hypervisor.kvm import KvmHypervisor
from corral.node.hypervisor.kvm.migration_tls import object_props
from corral.node.hypervisor.kvm.monitor import Monitor
from corral.node.hypervisor.spec import STATE_RUNNING, InstanceSpec
from corral.node.qemu_tls import ENDPOINT_CLIENT
from tests.helpers.cluster import unique_loopback
from tests.helpers.kvm_guest import MARKER, Serial, guest_spec, hypervisor_pair, serial

pytestmark = pytest.mark.slow

# One address per test run: two runs at once would otherwise meet on
# 127.0.0.1's migration_port (Ganeti's fixed 8102).
ADDRESS = unique_loopback()
COUNT = re.compile(r"CORRAL-GUEST-COUNT (\d+)")


@pytest.fixture
async def pair() -> AsyncIterator[tuple[KvmHypervisor, KvmHypervisor]]:
    async with hypervisor_pair(ADDRESS) as hvs:
        yield hvs


def last_count(console: Serial) -> int:
    found = [int(m.group(1)) for line in console.lines if (m := COUNT.search(line))]
    return found[-1] if found else -1


async def migrate(
    src: KvmHypervisor, dst: KvmHypervisor, spec: InstanceSpec, live: bool | None = None
) -> dict[str, object]:
    """The master's steps up to a finished transfer; the last status.  Live
    unless the source says the guest must be paused (``not_live``: under TCG,
    as these guests run), as the master decides."""
    info = await src.migration_info(spec)
    if live is None:
        live = "not_live" not in info
    accepted = await dst.accept_instance(spec, info, ADDRESS)
    # The target listens on Ganeti's migration_port.
    assert accepted["port"] == spec.hvparams["migration_port"]
    await src.migrate_instance("cluster.example.com", spec, ADDRESS, live, accepted)
    return await ended(src, spec)


async def ended(src: KvmHypervisor, spec: InstanceSpec, timeout: float = 120) -> dict[str, object]:
    """Poll the source's status as the master does, until it is not active."""
    async with asyncio.timeout(timeout):
        while (status := await src.migration_status(spec))["status"] == C.HV_MIGRATION_ACTIVE:
            await asyncio.sleep(0.05)
    return status


async def refused(monitor: Monitor, timeout: float = 60) -> None:
    """Poll the sender's migration, as the master does, until the target refused it."""
    async with asyncio.timeout(timeout):
        while (await monitor.execute("query-migrate"))["status"] not in ("failed", "cancelled"):
            await asyncio.sleep(0.05)


async def test_live_migration_keeps_the_guest_counting(
    pair: tuple[KvmHypervisor, KvmHypervisor],
) -> None:
    src, dst = pair
    spec = guest_spec("mig1", "corral.counter=1", migration_downtime=100)
    await src.start(spec, paused=True)
    async with serial(src.layout.serial(spec.name)) as before:
        await src.monitors[spec.name].execute("cont")
        await before.wait_for("CORRAL-GUEST-COUNT 5")
        status = await migrate(src, dst, spec)
        assert status["status"] == C.HV_MIGRATION_COMPLETED, status
        counted = last_count(before)
    info = await src.migration_info(spec)  # the source still has it, paused
    await dst.finalize_migration_dst(spec, info, True)
    await src.finalize_migration_src(spec, True, True)
    assert spec.name not in src.monitors and src.layout.names() == []
    assert dst.monitors[spec.name].state == STATE_RUNNING
    async with serial(dst.layout.serial(spec.name)) as after:
        # The counter goes on from where it was: no new boot, no reset.
        await after.wait_for(f"CORRAL-GUEST-COUNT {counted + 3}")
        assert after.count(MARKER) == 0
    assert not list(dst.layout.base.glob("ctrl/*.incoming"))
    assert not list(dst.layout.base.glob("ctrl/*.migtls"))


async def test_failed_migration_leaves_the_source_running(
    pair: tuple[KvmHypervisor, KvmHypervisor],
) -> None:
    src, dst = pair
    spec = guest_spec("mig2", "corral.counter=1")
    await src.start(spec)
    info = await src.migration_info(spec)
    accepted = await dst.accept_instance(spec, info, ADDRESS)
    target_pid = dst.layout.read_runtime(spec.name).pid  # type: ignore[union-attr]
    await dst.stop(spec.name, force=True)  # the target's QEMU is gone
    await src.migrate_instance("cluster.example.com", spec, ADDRESS, True, accepted)
    assert (await ended(src, spec))["status"] == "failed"
    await dst.finalize_migration_dst(spec, info, False)
    await src.finalize_migration_src(spec, False, True)
    assert src.monitors[spec.name].state == STATE_RUNNING
    assert dst.layout.names() == [] and target_pid
    async with serial(src.layout.serial(spec.name)) as console:
        await console.wait_for("CORRAL-GUEST-COUNT")


async def test_peer_without_a_cluster_certificate_cannot_send(
    pair: tuple[KvmHypervisor, KvmHypervisor], tmp_path: Path
) -> None:
    """A sender whose certificate another CA signed is refused by the target,
    and so is one without TLS."""
    src, dst = pair
    spec = guest_spec("mig3")
    await src.start(spec)
    info = await src.migration_info(spec)
    accepted = await dst.accept_instance(spec, info, ADDRESS)
    rogue_ca, rogue_key = certs.make_ca("rogue", 30)
    creds = tmp_path / "rogue"
    creds.mkdir()
    cert, key = certs.make_signed_cert(
        rogue_ca, rogue_key, "node9", 30, server=True, client=True, ips=[ADDRESS]
    )
    # It trusts the cluster CA too (the target's certificate passes its
    # check): only the target's check of the sender refuses it.
    trusted = dst.paths.ca_cert.read_bytes() + rogue_ca
    for name, data in (
        ("ca-cert.pem", trusted),
        ("client-cert.pem", cert),
        ("client-key.pem", key),
    ):
        (creds / name).write_bytes(data)
    monitor = src.monitors[spec.name]
    await monitor.execute(
        "object-add", {**object_props(str(creds), ENDPOINT_CLIENT), "id": "rogue"}
    )
    await monitor.execute(
        "migrate-set-parameters", {"tls-creds": "rogue", "tls-hostname": accepted["tls_hostname"]}
    )
    await monitor.execute("migrate", {"uri": f"tcp:{ADDRESS}:{accepted['port']}"})
    await refused(monitor)
    await monitor.execute("migrate-set-parameters", {"tls-creds": ""})
    await monitor.execute("migrate", {"uri": f"tcp:{ADDRESS}:{accepted['port']}"})
    await refused(monitor)
    # The target received nothing: it refuses to run what it has.
    if spec.name in dst.monitors:
        with pytest.raises(errors.OpExecError, match="not received completely"):
            await dst.finalize_migration_dst(spec, info, True)
    await dst.finalize_migration_dst(spec, info, False)
    assert dst.layout.names() == []
    assert monitor.state == STATE_RUNNING


async def test_missing_bridge_is_refused_before_qemu_starts(
    pair: tuple[KvmHypervisor, KvmHypervisor],
) -> None:
    _, dst = pair
    spec = guest_spec("mig4")
    wire = dict(spec.wire)
    wire["nics"] = [{"mac": "aa:00:00:11:22:33", "mode": "bridged", "link": "nobr4711"}]
    info = {"spec": wire, "machine": "pc"}
    with pytest.raises(errors.OpExecError, match="NIC 0"):
        await dst.accept_instance(spec, info, ADDRESS)
    assert dst.layout.names() == [] and not dst.monitors


async def test_jailed_guest_migrates(pair: tuple[KvmHypervisor, KvmHypervisor]) -> None:
    """A QEMU chrooted and unprivileged on both ends: the source loads its TLS
    credentials from inside its chroot, which is root's alone again after."""
    src, dst = pair
    spec = guest_spec(
        "jail2", "corral.counter=1", use_chroot=True, security_model="user",
        security_domain="nobody",
    )  # fmt: skip
    await src.start(spec)
    async with serial(src.layout.serial(spec.name)) as booting:
        await booting.wait_for(MARKER)  # up: a new boot would print it again
    chroot = src.layout.chroot(spec.name)
    status = await migrate(src, dst, spec)
    assert status["status"] == C.HV_MIGRATION_COMPLETED, status
    assert chroot.stat().st_mode & 0o777 == 0o700 and list(chroot.iterdir()) == []
    info = await src.migration_info(spec)
    await dst.finalize_migration_dst(spec, info, True)
    await src.finalize_migration_src(spec, True, True)
    pid = dst.monitors[spec.name].pid
    assert Path(os.readlink(f"/proc/{pid}/root")) == dst.layout.chroot(spec.name)
    async with serial(dst.layout.serial(spec.name)) as after:
        await after.wait_for("CORRAL-GUEST-COUNT")
        assert after.count(MARKER) == 0


async def test_a_tcg_guest_is_moved_paused(pair: tuple[KvmHypervisor, KvmHypervisor]) -> None:
    """QEMU's live migration loses memory writes under TCG: the source says so
    (the master then migrates it paused); the mechanics of a live migration
    still work when asked for (the guest's integrity is what is not assured)."""
    src, dst = pair
    spec = guest_spec("tcg1", "corral.counter=1")
    await src.start(spec)
    info = await src.migration_info(spec)
    assert "runs under TCG" in info["not_live"]
    status = await migrate(src, dst, spec, live=True)
    assert status["status"] == C.HV_MIGRATION_COMPLETED, status
    await dst.finalize_migration_dst(spec, await src.migration_info(spec), True)
    await src.finalize_migration_src(spec, True, True)
    assert dst.monitors[spec.name].state == STATE_RUNNING
