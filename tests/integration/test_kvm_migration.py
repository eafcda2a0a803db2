"""kvm instances migrating between two nodes that each have a network stack
of their own (network namespaces): real masterd and noded, gnt-* commands,
real QEMU guests under TCG, QEMU's TLS with the nodes' certificates."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyroute2 import NetNS  # type: ignore[import-untyped]

from corral import testbed
from corral.node.hypervisor.kvm.runtime import Layout
from corral.node.netrules import nft
from corral.process.daemons import running_pid, start_daemon
from tests.helpers.cluster import PERMISSIVE_IPOLICY
from tests.helpers.guest import guest_initramfs, guest_kernel
from tests.helpers.jobs import wait_final
from tests.helpers.kvm_guest import MARKER, kill_leftovers
from tests.helpers.netns import NetnsBed
from tests.helpers.osdef import make_os
from tests.helpers.serial_console import SerialConsole
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.slow

# Up to the end of its line: a read may end in the middle of the number.
COUNT = re.compile(r"CORRAL-GUEST-COUNT (\d+)\r?\n")
HVPARAMS = ",".join(
    (
        f"kernel_path={guest_kernel()}",
        f"initrd_path={guest_initramfs()}",
        "kernel_args=corral.counter=1",
        "kvm_flag=disabled",  # KVM hangs guests on this machine kind
        "serial_speed=115200",
        "migration_downtime=100",
    )
)


@pytest.fixture(scope="module")
def bed() -> Iterator[testbed.Testbed]:
    root = Path(tempfile.mkdtemp(prefix="kvmm", dir="/tmp"))  # short: socket paths
    try:
        with NetnsBed(2) as network:
            running = testbed.up(
                root,
                nodes=2,
                network=network,
                init_args=(
                    *PERMISSIVE_IPOLICY,
                    "--enabled-hypervisors=kvm",
                    "-H",
                    f"kvm:{HVPARAMS}",
                ),
            )
            running.network_bed = network  # type: ignore[attr-defined]
            try:
                for node in running.nodes:
                    make_os(node.paths, "tiny")
                yield running
            finally:
                running.down()
                for node in running.nodes:
                    kill_leftovers(node.paths.run_dir)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (result.stdout, result.stderr)
    return result.stdout


def placement(bed: testbed.Testbed, name: str) -> tuple[str, str]:
    out = ok(bed.gnt("instance", "list", "--no-headers", "-o", "pnode,status", name))
    pnode, status = out.split()
    return pnode, status


def add(bed: testbed.Testbed, name: str, node: str, *args: str) -> None:
    ok(
        bed.gnt(
            "instance", "add", "-o", "tiny+default", "--no-nics", "-B", "memory=128",
            "--no-name-check", "--no-ip-check", "-n", node, *args, name,
        )
    )  # fmt: skip


def console(node: testbed.BedNode, name: str) -> SerialConsole:
    return SerialConsole(Layout(node.paths.run_dir).serial(name))


def qemu_pids(bed: testbed.Testbed, name: str) -> list[int | None]:
    out = []
    for node in bed.nodes:
        runtime = Layout(node.paths.run_dir).read_runtime(name)
        out.append(runtime.pid if runtime else None)
    return out


def test_live_migration_keeps_the_guest_counting(bed: testbed.Testbed) -> None:
    node1, node2 = bed.nodes
    add(bed, "live1", node1.name, "-t", "diskless")
    before = console(node1, "live1")
    counted = int(before.wait_for(COUNT.pattern).group(1))
    result = ok(bed.gnt("instance", "migrate", "-f", "-n", node2.name, "live1"))
    assert "* memory transfer complete" in result, result
    # These guests run under TCG, whose live migration loses memory writes.
    assert "Migrating instance live1 paused, not live: it runs under TCG" in result, result
    # What the source printed up to its last moment, then the target's console.
    before.close()
    for match in re.finditer(COUNT, before.seen()):
        counted = max(counted, int(match.group(1)))
    assert placement(bed, "live1") == (node2.name, "running")
    assert qemu_pids(bed, "live1")[0] is None
    after = console(node2, "live1")
    resumed = int(after.wait_for(COUNT.pattern).group(1))
    assert counted < resumed <= counted + 50, (counted, resumed)
    assert MARKER not in after.seen()  # the same guest, not a new boot
    after.close()

    # --non-live: paused, sent, resumed on the other side
    ok(bed.gnt("instance", "migrate", "-f", "--non-live", "-n", node1.name, "live1"))
    assert placement(bed, "live1") == (node1.name, "running")
    again = console(node1, "live1")
    assert int(again.wait_for(COUNT.pattern).group(1)) > resumed
    again.close()
    ok(bed.gnt("instance", "remove", "-f", "--shutdown-timeout=0", "live1"))


def test_file_disks_are_copied_byte_identical(bed: testbed.Testbed) -> None:
    node1, node2 = bed.nodes
    add(bed, "copy1", node1.name, "-t", "file", "--disk", "0:size=16m", "--no-start")
    (disk,) = (node1.paths.file_storage_dir / "copy1").iterdir()
    with disk.open("r+b") as out:
        out.write(os.urandom(16 * 2**20))
    digest = hashlib.sha256(disk.read_bytes()).hexdigest()
    ok(bed.gnt("instance", "startup", "copy1"))
    result = ok(bed.gnt("instance", "migrate", "-f", "-n", node2.name, "copy1"))
    assert "creating disk/0 on target node" in result, result
    assert placement(bed, "copy1") == (node2.name, "running")
    assert not (node1.paths.file_storage_dir / "copy1").exists()
    ok(bed.gnt("instance", "shutdown", "--timeout=0", "copy1"))
    (moved,) = (node2.paths.file_storage_dir / "copy1").iterdir()
    assert hashlib.sha256(moved.read_bytes()).hexdigest() == digest
    # A failover cannot copy them: refused, nothing changes.
    refused = bed.gnt("instance", "failover", "-f", "copy1")
    assert refused.returncode != 0 and "does not allow failovers" in refused.stderr
    assert placement(bed, "copy1") == (node2.name, "ADMIN_down")
    ok(bed.gnt("instance", "remove", "-f", "--shutdown-timeout=0", "copy1"))


def ruled_uids(bed: testbed.Testbed, node: testbed.BedNode) -> str:
    """The uids in the node's network rules for QEMU's users ("" without any)."""
    table = nft.table_name(node.paths)
    argv = bed.network_bed.wrap(node.index, ["nft", "list", "set", "inet", table, "uids"])  # type: ignore[attr-defined]
    listing = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
    found = re.search(r"elements = \{ ([^}]*) \}", listing)
    return found.group(1).strip() if found else ""


def test_ruled_guest_migrates_through_its_link(bed: testbed.Testbed) -> None:
    """A QEMU under the network rules (a uid of the pool) reaches the target
    node only through the link its migration opens (its memory stream).
    Diskless: a pool guest's file disks cannot be copied yet (the target's
    block-export-add finds its disk read-only, rules or not)."""
    node1, node2 = bed.nodes
    ok(bed.gnt("cluster", "modify", "--uid-pool", "47340-47343"))
    try:
        add(bed, "ruled1", node1.name, "-t", "diskless", "-H", "kvm:security_model=pool")
        source = Layout(node1.paths.run_dir).read_runtime("ruled1")
        assert source is not None and source.rules_uid is not None
        assert ruled_uids(bed, node1) == str(source.rules_uid)
        ok(bed.gnt("instance", "migrate", "-f", "-n", node2.name, "ruled1"))
        assert placement(bed, "ruled1") == (node2.name, "running")
        target = Layout(node2.paths.run_dir).read_runtime("ruled1")
        assert target is not None and target.rules_uid is not None
        # The source's rules went with its guest; the target's rule the new QEMU.
        assert (ruled_uids(bed, node1), ruled_uids(bed, node2)) == ("", str(target.rules_uid))
        after = console(node2, "ruled1")
        after.wait_for(COUNT.pattern)  # it runs on
        after.close()
        ok(bed.gnt("instance", "remove", "-f", "--shutdown-timeout=0", "ruled1"))
        assert ruled_uids(bed, node2) == ""
    finally:
        ok(bed.gnt("cluster", "modify", "--uid-pool", ""))


def test_failover_stops_and_starts_on_the_other_node(bed: testbed.Testbed) -> None:
    node1, node2 = bed.nodes
    add(bed, "fail1", node1.name, "-t", "diskless")
    first = qemu_pids(bed, "fail1")[0]
    ok(bed.gnt("instance", "failover", "-f", "--shutdown-timeout=0", "fail1"))
    assert placement(bed, "fail1") == (node2.name, "running")
    pids = qemu_pids(bed, "fail1")
    assert pids[0] is None and pids[1] is not None and pids[1] != first
    booted = console(node2, "fail1")
    booted.wait_for(COUNT.pattern)
    booted.close()
    ok(bed.gnt("instance", "remove", "-f", "--shutdown-timeout=0", "fail1"))


def submit_migration(bed: testbed.Testbed, name: str, target: str) -> int:
    result = bed.gnt("instance", "migrate", "-f", "--submit", "-n", target, name)
    ok(result)
    return int(result.stderr.split()[-1])  # "JobID: N"


def test_target_qemu_killed_mid_migration(bed: testbed.Testbed) -> None:
    """The source keeps running; the target is cleaned (runtime, disk copies)."""
    node1, node2 = bed.nodes
    add(bed, "kill1", node1.name, "-t", "file", "--disk", "0:size=16m")
    job_id = submit_migration(bed, "kill1", node2.name)
    target = Layout(node2.paths.run_dir)
    wait_until(lambda: target.read_runtime("kill1") is not None, 120, "the target's QEMU")
    runtime = target.read_runtime("kill1")
    assert runtime is not None
    os.kill(runtime.pid, signal.SIGKILL)
    assert wait_final(bed.client(), [job_id], timeout=120) == [["error"]]
    wait_until(lambda: target.names() == [], 60, "the target's leftovers to go")
    assert placement(bed, "kill1") == (node1.name, "running")
    copies = node2.paths.file_storage_dir / "kill1"
    assert not copies.exists() or not any(copies.iterdir())
    source = console(node1, "kill1")
    source.wait_for(COUNT.pattern)  # runs on
    source.close()
    ok(bed.gnt("instance", "remove", "-f", "--shutdown-timeout=0", "kill1"))


def job_field(bed: testbed.Testbed, job_id: int, name: str = "oplog") -> str:
    (row,) = bed.client().query_jobs([job_id], [name])
    return str(row)


def restart_noded(bed: testbed.Testbed, node: testbed.BedNode) -> None:
    pid_file = node.paths.pid_file("corral-noded")
    wait_until(lambda: running_pid(pid_file) is None, 30, "noded gone")
    start_daemon(
        bed.network.wrap(
            node.index,
            [sys.executable, "-m", "corral.daemons.noded", "--bind", node.address,
             "--port", str(bed.port)],
        ),
        bed.env(node),
        timeout=60,
    )  # fmt: skip


def test_target_noded_killed_mid_migration(bed: testbed.Testbed) -> None:
    """QEMU sends on without the target's noded; the master cannot finalize
    the target, so the job fails, the guest waits paused on the target (its
    source let it go, as Ganeti's), kept by the restarted noded, and
    ``gnt-instance migrate --cleanup`` records and resumes it there."""
    node1, node2 = bed.nodes
    # 8 MiB/s: the transfer lasts seconds, noded dies in the middle of it.
    add(bed, "kill2", node1.name, "-t", "diskless", "-H", "kvm:migration_bandwidth=8")
    before = console(node1, "kill2")
    before.wait_for(COUNT.pattern)
    # Closed before the migration: a console that falls behind (a loaded
    # machine) while the guest migrates leaves the guest's serial port stuck on
    # the target (QEMU 7.2 does not carry the port's pending write across).
    before.close()
    counted = max(int(m.group(1)) for m in COUNT.finditer(before.seen()))
    job_id = submit_migration(bed, "kill2", node2.name)
    # The job log reports the transfer's progress (MiB of RAM sent).
    wait_until(lambda: "memory transfer progress: " in job_field(bed, job_id), 120, "progress")
    assert re.search(r"memory transfer progress: \d+/\d+ MiB of RAM sent", job_field(bed, job_id))
    noded = running_pid(node2.paths.pid_file("corral-noded"))
    assert noded is not None
    os.kill(noded, signal.SIGKILL)
    try:
        assert wait_final(bed.client(), [job_id], timeout=300) == [["error"]]
        assert "Could not finalize instance migration" in job_field(bed, job_id, "opresult")
    finally:
        restart_noded(bed, node2)
    assert placement(bed, "kill2") == (node1.name, "ERROR_down")
    out = ok(bed.gnt("instance", "migrate", "-f", "--cleanup", "kill2"))
    assert f"instance running on secondary node ({node2.name}), updating config" in out, out
    assert placement(bed, "kill2") == (node2.name, "running")
    after = console(node2, "kill2")
    assert int(after.wait_for(COUNT.pattern).group(1)) > counted
    assert MARKER not in after.seen()
    after.close()
    ok(bed.gnt("instance", "remove", "-f", "--shutdown-timeout=0", "kill2"))


def test_target_without_the_bridge_is_refused(bed: testbed.Testbed) -> None:
    node1, node2 = bed.nodes
    bridge = "brmig0"
    network: NetnsBed = bed.network_bed  # type: ignore[attr-defined]
    with NetNS(network.namespace(node1.index)) as ns:  # only the source has it
        ns.link("add", ifname=bridge, kind="bridge")
        ns.link("set", index=ns.link_lookup(ifname=bridge)[0], state="up")
    ok(
        bed.gnt(
            "instance", "add", "-o", "tiny+default", "-B", "memory=128", "-t", "diskless",
            "--net", f"0:mode=bridged,link={bridge}", "--no-name-check", "--no-ip-check",
            "-n", node1.name, "br1",
        )
    )  # fmt: skip
    pid = qemu_pids(bed, "br1")[0]
    refused = bed.gnt("instance", "migrate", "-f", "-n", node2.name, "br1")
    assert refused.returncode != 0
    assert "NIC 0: " in refused.stderr and bridge in refused.stderr, refused.stderr
    assert placement(bed, "br1") == (node1.name, "running")
    assert qemu_pids(bed, "br1") == [pid, None]
    ok(bed.gnt("instance", "remove", "-f", "--shutdown-timeout=0", "br1"))


def test_target_without_room_is_refused(bed: testbed.Testbed) -> None:
    node1, node2 = bed.nodes
    add(bed, "big1", node1.name, "-t", "diskless")
    pid = qemu_pids(bed, "big1")[0]
    # Takes effect at the next start; a migration must find room for it.
    huge = str(64 * 2**20)  # 64 TiB
    ok(bed.gnt("instance", "modify", "--force", "-B", f"minmem={huge},maxmem={huge}", "big1"))
    refused = bed.gnt("instance", "migrate", "-f", "-n", node2.name, "big1")
    assert refused.returncode != 0
    assert "memory" in refused.stderr.lower(), refused.stderr
    assert placement(bed, "big1") == (node1.name, "running")
    assert qemu_pids(bed, "big1") == [pid, None]
    ok(bed.gnt("instance", "remove", "-f", "--shutdown-timeout=0", "big1"))


def test_cleanup_after_masterd_died_mid_migration(bed: testbed.Testbed) -> None:
    """The target had started the guest when masterd died: ``--cleanup``
    finds it on both nodes, drops the target's and keeps the source's; then
    masterd removes the disk copy the target had received."""
    node1, node2 = bed.nodes
    add(bed, "half1", node1.name, "-t", "file", "--disk", "0:size=16m")
    copies = node2.paths.file_storage_dir / "half1"
    pid = qemu_pids(bed, "half1")[0]
    job_id = submit_migration(bed, "half1", node2.name)
    target = Layout(node2.paths.run_dir)
    wait_until(lambda: target.read_runtime("half1") is not None, 120, "the target's QEMU")
    masterd = running_pid(node1.paths.pid_file("corral-masterd"))
    assert masterd is not None
    os.kill(masterd, signal.SIGKILL)
    wait_until(lambda: running_pid(node1.paths.pid_file("corral-masterd")) is None, 30, "gone")
    start_daemon(
        bed.network.wrap(node1.index, [sys.executable, "-m", "corral.daemons.masterd"]),
        bed.env(node1),
        timeout=60,
    )
    assert wait_final(bed.client(), [job_id], timeout=120) == [["error"]]
    out = ok(bed.gnt("instance", "migrate", "-f", "--cleanup", "half1"))
    assert "Trying to cleanup after failed migration" in out, out
    assert f"running on its primary node ({node1.name})" in out, out
    assert placement(bed, "half1") == (node1.name, "running")
    assert qemu_pids(bed, "half1") == [pid, None]
    wait_until(
        lambda: not copies.exists() or not any(copies.iterdir()), 60, "the target's copy gone"
    )
    assert len(list((node1.paths.file_storage_dir / "half1").iterdir())) == 1
    source = console(node1, "half1")
    source.wait_for(COUNT.pattern)  # runs on
    source.close()
    ok(bed.gnt("instance", "remove", "-f", "--shutdown-timeout=0", "half1"))
