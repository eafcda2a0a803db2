"""A kvm guest's data survives ``gnt-backup export`` and ``import``: a real
two-node cluster, the ``corral-tiny`` OS (its export/import scripts stream
the disk), a QEMU guest under TCG booting its disk through GRUB and counting
its boots in a file on that disk."""

from __future__ import annotations

import configparser
import re
from collections.abc import Iterator

import pytest

from corral.node.hypervisor.kvm.runtime import Layout
from tests.helpers.cluster import TestCluster
from tests.helpers.instances import add, ok, query
from tests.helpers.kvm_pair import NODE1, NODE2, kvm_two_nodes
from tests.helpers.noded import Noded
from tests.helpers.serial_console import SerialConsole
from tests.helpers.tiny_os import MIN_DISK_MIB, TINY_OS

pytestmark = pytest.mark.slow


MARKER = "written-before-export"
# The guest's lines about itself (kernel messages may share the console).
SAID = re.compile(r"CORRAL-GUEST-(?:UP|DISK|BOOT) \S+")


@pytest.fixture
def two_nodes() -> Iterator[tuple[TestCluster, Noded]]:
    """A kvm cluster of two nodes, both with ``corral-tiny``."""
    with kvm_two_nodes("kvmbk") as pair:
        yield pair


def boots(cl: TestCluster, name: str) -> list[str]:
    """Start ``name``, stop it once its guest is ready; what the guest said
    about itself and its disk on the serial console."""
    ok(cl.gnt("instance", "startup", name))
    # The socket is there once startup returns; the guest needs seconds
    # (SeaBIOS, GRUB, the kernel under TCG) before it prints anything.
    console = SerialConsole(Layout(cl.paths.run_dir).serial(name))
    try:
        console.wait_for("CORRAL-GUEST-READY")  # printed after the disk's lines
    finally:
        console.close()
    ok(cl.gnt("instance", "shutdown", "--timeout=60", name))
    return SAID.findall(console.seen())


def test_guest_data_survives_export_and_import(two_nodes: tuple[TestCluster, Noded]) -> None:
    cl, node2 = two_nodes
    # GRUB boot (no kernel_path): the boot flag lives in the disk's grub.cfg,
    # written from the OS parameter kernel_args.
    ok(
        add(
            cl, "orig", "-t", "file", f"--disk=0:size={MIN_DISK_MIB}m", "-o", f"{TINY_OS}+default",
            "-O", f"marker={MARKER},kernel_args=corral.reboot=1", "--no-nics", "-n", NODE1,
            "-B", "memory=128", "-H", "kvm:kernel_path=,initrd_path=", "--no-start",
        )
    )  # fmt: skip
    assert boots(cl, "orig") == [
        "CORRAL-GUEST-UP orig",
        f"CORRAL-GUEST-DISK {MARKER}",
        "CORRAL-GUEST-BOOT 1",
    ]

    out = ok(cl.gnt("backup", "export", "-n", NODE2, "orig"))
    assert "disk/0 finished sending data" in out
    config = configparser.ConfigParser()
    config.read(node2.paths.root / "srv" / "ganeti" / "export" / "orig" / "config.ini")
    assert config["export"]["os"] == f"{TINY_OS}+default"
    assert config["os"]["marker"] == MARKER
    ok(cl.gnt("instance", "remove", "-f", "orig"))
    assert query(cl, ["name"]) == {}

    ok(
        cl.gnt(
            "backup", "import", "-n", NODE1, "-t", "file", "--src-node", NODE2,
            "--src-dir=/srv/ganeti/export/orig", "--no-name-check", "--no-ip-check", "copy",
        )
    )  # fmt: skip
    assert query(cl, ["os", "osparams"], "copy")["copy"] == {
        "os": f"{TINY_OS}+default",
        "osparams": {"marker": MARKER, "kernel_args": "corral.reboot=1"},
    }
    # corral-tiny's own export and import scripts carried the disk (no raw dump).
    os_logs = cl.paths.log_dir / "os"
    for script, instance in (("export", "orig"), ("import", "copy")):
        assert list(os_logs.glob(f"{script}-{TINY_OS}-{instance}-disk0-*.log")), script
    # The boot count written on the disk before the export goes on; the
    # marker is the original's; the rename script gave the disk the new name.
    assert boots(cl, "copy") == [
        "CORRAL-GUEST-UP copy",
        f"CORRAL-GUEST-DISK {MARKER}",
        "CORRAL-GUEST-BOOT 2",
    ]
    ok(cl.gnt("instance", "remove", "-f", "copy"))
