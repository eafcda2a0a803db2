"""The config drive on real QEMU guests (TCG).  On the hypervisor object: the
guest sees a read-only CD-ROM labelled ``cidata`` holding its NoCloud files
(read over its serial console), QMP shows it read-only, and the ISO goes with
the guest.  Through a real cluster (gnt-instance, masterd, noded): the
settings reach the node and the drive is built again at each start."""

from __future__ import annotations

import dataclasses
import io
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pycdlib
import pytest

from corral.node.hypervisor.kvm import KvmHypervisor
from corral.node.hypervisor.kvm.runtime import Layout
from tests.helpers.instances import add, ok
from tests.helpers.kvm_guest import booted, guest_spec, kvm_cluster, kvm_hypervisor
from tests.helpers.kvm_guest import short_root as kvm_short_root
from tests.helpers.metad import SECRET_VALUE, sample

NAME = "cidrive1"
# The shell echoes what is typed: what is waited for is never typed as such.
DONE = "CORRAL-CIDATA-42"
# In the guest: wait for the CD-ROM, print its ISO 9660 volume label (bytes
# 40-71 of sector 16), then mount it and print its meta-data.
READ_DRIVE = (
    "while [ ! -b /dev/sr0 ]; do usleep 100000; done;"
    " echo LABEL=$(dd if=/dev/sr0 bs=1 skip=32808 count=32 2>/dev/null);"
    " mount -t iso9660 -o ro /dev/sr0 /mnt/disk && cat /mnt/disk/meta-data;"
    " echo CORRAL-CIDATA-$((40 + 2))\n"
)


@pytest.fixture
def short_root() -> Iterator[Path]:
    with kvm_short_root("kvcd") as root:
        yield root


@pytest.fixture
async def hv(short_root: Path) -> AsyncIterator[KvmHypervisor]:
    async with kvm_hypervisor(short_root) as hypervisor:
        yield hypervisor


@pytest.mark.slow
@pytest.mark.parametrize(
    "hvp",
    [
        {},
        # The ISO is root's (0600): QEMU opens it before it drops to nobody in its chroot.
        {"use_chroot": True, "security_model": "user", "security_domain": "nobody"},
    ],
    ids=["root", "jailed"],
)
async def test_the_guest_reads_its_cidata_cdrom_and_the_iso_goes_at_stop(
    hv: KvmHypervisor, hvp: dict[str, Any]
) -> None:
    meta = sample(NAME, installing=True)  # a secret in the data: it must not reach the drive
    plain = guest_spec(NAME, "corral.cdrom=1", **hvp)
    spec = dataclasses.replace(plain, wire={**plain.wire, "config_drive": meta.to_record()})
    iso = hv.layout.config_drive(NAME)
    async with booted(hv, spec) as console:
        await console.wait_for("CORRAL-GUEST-SHELL")
        await console.send(READ_DRIVE)
        done = await console.wait_for(DONE, timeout=120)
        shown = console.lines[:done]
        assert "LABEL=cidata" in shown
        assert f'instance-id: "{meta.instance_id}"' in shown
        assert f'local-hostname: "{meta.hostname}"' in shown
        blocks = await hv.monitors[NAME].execute("query-block")
        (drive,) = [b for b in blocks if b.get("qdev") == "cidata-dev"]
        assert drive["removable"] is True
        assert drive["inserted"]["ro"] is True
        assert drive["inserted"]["file"] == str(iso)
        assert SECRET_VALUE.encode() not in iso.read_bytes()
    assert not iso.exists()


def drive_files(layout: Layout, name: str) -> dict[str, bytes]:
    """The NoCloud files on ``name``'s config drive, as the node holds it."""
    iso = pycdlib.PyCdlib()
    iso.open_fp(io.BytesIO(layout.config_drive(name).read_bytes()))
    try:
        files = {}
        for leaf in ("meta-data", "user-data"):
            out = io.BytesIO()
            iso.get_file_from_iso_fp(out, rr_path=f"/{leaf}")
            files[leaf] = out.getvalue()
        return files
    finally:
        iso.close()


@pytest.mark.slow
def test_gnt_instance_settings_reach_the_drive_rebuilt_at_each_start() -> None:
    first, second = "#cloud-config\nruncmd: [echo one]\n", "#cloud-config\nruncmd: [echo two]\n"
    with kvm_cluster("kvcd") as cl:
        layout = Layout(cl.paths.run_dir)
        ok(
            add(
                cl,
                "inst1",
                *("-t", "diskless", "-o", "tiny+default", "--no-nics", "-B", "memory=128"),
                *("-O", "config-drive=yes", "--os-parameters-private", f"user-data={first}"),
            )
        )
        runtime = layout.read_runtime("inst1")
        assert runtime is not None
        assert f"file={layout.config_drive('inst1')}" in " ".join(runtime.argv)
        assert stat.S_IMODE(layout.config_drive("inst1").stat().st_mode) == 0o600
        before = drive_files(layout, "inst1")
        assert before["user-data"] == first.encode()
        assert b'local-hostname: "inst1"' in before["meta-data"]

        ok(cl.gnt("instance", "shutdown", "--timeout=0", "inst1"))
        assert not layout.config_drive("inst1").exists()
        ok(cl.gnt("instance", "modify", "--os-parameters-private", f"user-data={second}", "inst1"))
        ok(cl.gnt("instance", "startup", "inst1"))
        after = drive_files(layout, "inst1")
        assert after["user-data"] == second.encode()
        assert after["meta-data"] != before["meta-data"]  # a new instance-id
        ok(cl.gnt("instance", "remove", "-f", "--shutdown-timeout=0", "inst1"))
        assert not layout.config_drive("inst1").exists()
