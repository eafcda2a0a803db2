"""A kvm guest writing to a mirrored disk whose secondary dies (issue 26):
two kvm hypervisors on two node roots under one cluster CA, the secondary's
copy exported by a real qemu-storage-daemon over TLS, a real QEMU guest under
TCG writing a counter to its disk and printing each value once its write is
flushed.  The secondary's daemon is killed, or stopped (SIGSTOP: the
primary's watchdog cuts the link off): the guest pauses (no write fails
in it), the primary's node reports the fault; once told to go on without the
secondary (what the master says after recording the copy outdated), the
guest continues where it was, its writes on the primary's copy alone.  The
secondary back, a resync copies what it missed (from the dirty bitmap) while
the guest writes on, and both copies end equal."""

from __future__ import annotations

import dataclasses
import os
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from corral.node.hypervisor.kvm import KvmHypervisor
from corral.node.hypervisor.spec import DiskSpec, InstanceSpec
from corral.node.storage import qsd
from corral.node.storage.mirrored import Link
from tests.helpers.cluster import unique_loopback
from tests.helpers.kvm_guest import guest_spec, hypervisor_pair, serial
from tests.helpers.writer_guest import WRITER_ARGS, last_written, sector_count

pytestmark = pytest.mark.slow

ADDRESS = unique_loopback()  # the NBD export's: no other test run shares it
PORT = 11000
MIB = 1024 * 1024


@pytest.fixture
async def pair() -> AsyncIterator[tuple[KvmHypervisor, KvmHypervisor]]:
    async with hypervisor_pair(ADDRESS) as hvs:
        yield hvs


def mirrored_guest(
    primary: KvmHypervisor, secondary: KvmHypervisor
) -> tuple[InstanceSpec, Path, Path]:
    """A writing guest on a 16 MiB mirrored disk; its two copies."""
    disk = str(uuid.uuid4())
    copies = []
    for hv in (primary, secondary):
        path = hv.paths.file_storage_dir / "w1" / f"{disk}.mirrored.disk0"
        path.parent.mkdir(parents=True)
        with path.open("wb") as handle:
            handle.truncate(16 * MIB)
        copies.append(path)
    link = Link(export=disk, host=ADDRESS, port=PORT, peer_name="node2.example.com")
    spec = dataclasses.replace(
        guest_spec("w1", WRITER_ARGS),
        disks=(DiskSpec(0, disk, copies[0], "rw", 16, "mirrored", False, mirror=link),),
    )
    return spec, copies[0], copies[1]


@pytest.mark.parametrize(
    "failure",
    [signal.SIGKILL, signal.SIGSTOP],  # dead: its link resets; frozen: the watchdog cuts it
    ids=["killed", "frozen"],
)
async def test_a_failed_secondary_pauses_the_guest_until_it_is_left_behind(
    pair: tuple[KvmHypervisor, KvmHypervisor], failure: signal.Signals
) -> None:
    primary, secondary = pair
    spec, mine, theirs = mirrored_guest(primary, secondary)
    disk = spec.disks[0].uuid
    export = await qsd.start_nbd_export(secondary.paths, disk, theirs, ADDRESS, PORT)
    try:
        await primary.start(spec)
        async with serial(primary.layout.serial("w1")) as console:
            await console.wait_for("CORRAL-GUEST-WROTE 5", timeout=120)
            assert await primary.mirror_faults(0) == []
            os.kill(export, failure)
            [fault] = await primary.mirror_faults(30)
            assert (fault.instance, fault.disk) == ("w1", disk)
            # Paused on the failed write: nothing acknowledged from then on.
            monitor = primary.monitors["w1"]
            assert (await monitor.execute("query-status"))["status"] == "io-error"
            acknowledged = last_written("".join(f"{line}\n" for line in console.lines))
            assert sector_count(theirs) >= acknowledged  # every acknowledged write is there

            await primary.mirror_degrade("w1", disk)
            # noded restarts: it knows the guest writes alone now (its command
            # line has the link), and watches no link.
            await primary.close()
            await primary.resume()
            assert primary.mirrors.alone("w1", disk)
            index = await console.wait_for(f"CORRAL-GUEST-WROTE {acknowledged + 5}", timeout=60)
            assert not any("WRITE-FAILED" in line for line in console.lines[: index + 1])
            assert await primary.mirror_faults(0) == []
            # Going on alone: the primary's copy moves on, the secondary's stays.
            assert sector_count(mine) >= acknowledged + 5
            assert sector_count(theirs) <= acknowledged + 1

            # The secondary comes back: what it missed is copied while the
            # guest writes, then the guest writes both copies again.
            if failure == signal.SIGSTOP:
                os.kill(export, signal.SIGCONT)
            await qsd.stop(secondary.paths, disk, "nbd")
            export = await qsd.start_nbd_export(secondary.paths, disk, theirs, ADDRESS, PORT)
            seen: list[tuple[int, int]] = []
            link = spec.disks[0].mirror
            assert link is not None
            await primary.mirror_resync("w1", link, lambda *p: seen.append(p))
            assert seen and seen[-1][0] == seen[-1][1] > 0
            resynced = last_written("".join(f"{line}\n" for line in console.lines))
            await console.wait_for(f"CORRAL-GUEST-WROTE {resynced + 5}", timeout=60)
            assert sector_count(theirs) >= resynced + 5
        # And again: the link the resync joined is known and watched.
        await primary.close()
        await primary.resume()
        assert not primary.mirrors.alone("w1", disk)
        assert primary.mirrors.link("w1", disk).port == PORT
        await primary.stop("w1", timeout=0, force=True)
        assert mine.read_bytes() == theirs.read_bytes()
    finally:
        if failure == signal.SIGSTOP:
            os.kill(export, signal.SIGCONT)  # a stopped process ignores SIGTERM
        await qsd.stop(secondary.paths, disk, "nbd")
