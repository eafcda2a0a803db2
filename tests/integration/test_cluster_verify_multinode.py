"""``gnt-cluster verify`` on a 3-node test bed: clean, then one fault at a
time, each found with Ganeti's code and the node (or instance) concerned.

The bed: node1 (master), node2 and node3, each a real corral-noded with its
own root and loopback address, joined with tokens.  node2 holds a file-disk
instance (stopped) and a diskless one (running); node3 holds nothing.  Each
test breaks one thing, checks the findings, repairs it and checks that the
cluster verifies clean again.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral import testbed
from corral.crypto.certs import make_ca, write_node_cert
from corral.paths import Paths
from corral.process.daemons import running_pid, start_daemon, stop_daemon
from corral.rpc.reachability import DEFAULT_QUERY_DEADLINE
from tests.helpers.cluster import PERMISSIVE_IPOLICY
from tests.helpers.osdef import make_os
from tests.helpers.waiting import wait_until

STAMP = re.compile(r"^\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4} ")
NODE1, NODE2, NODE3 = (testbed.node_name(k) for k in (1, 2, 3))
FILE_INST, RUN_INST = "disk1.example.com", "run1.example.com"
NODED = "corral-noded"
# A sitecustomize that shifts noded's clock (time.time) by CORRAL_TEST_CLOCK_SHIFT
# seconds: a node with a wrong clock, without touching the machine's.
SKEW_MODULE = """
import os, time
_shift = float(os.environ.get("CORRAL_TEST_CLOCK_SHIFT", "0"))
_real = time.time
time.time = lambda: _real() + _shift
"""


def sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


def gnt_ok(bed: testbed.Testbed, command: str, *args: str) -> str:
    result = bed.gnt(command, *args)
    assert result.returncode == 0, (command, args, result.stdout, result.stderr)
    return result.stdout


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[testbed.Testbed]:
    root = tmp_path_factory.mktemp("verify-bed")
    running = testbed.up(root, nodes=3, init_args=PERMISSIVE_IPOLICY)
    try:
        for node in running.nodes:
            make_os(node.paths, "plain", variants=None)
        common = ["-o", "plain", "--no-name-check", "--no-ip-check", "-n", NODE2]
        gnt_ok(running, "instance", "add", "-t", "file", "--disk", "0:size=16m",
               "--no-install", "--no-start", *common, FILE_INST)  # fmt: skip
        gnt_ok(running, "instance", "add", "-t", "diskless", "--no-install", *common, RUN_INST)
        yield running
    finally:
        running.down()


def ssconf_synced(bed: testbed.Testbed) -> bool:
    """Whether every node's ssconf files are the master's (pushed in the background)."""
    master = bed.master.paths.data_dir
    for node in bed.nodes[1:]:
        for path in master.glob("ssconf_*"):
            mine = node.paths.data_dir / path.name
            if not mine.exists() or mine.read_bytes() != path.read_bytes():
                return False
    return True


def verify(bed: testbed.Testbed, *args: str, sync: bool = True) -> tuple[int, list[str], list[str]]:
    """``gnt-cluster verify --error-codes``: exit code, findings, all lines
    (``sync``: once the ssconf files are on every node)."""
    if sync:
        wait_until(lambda: ssconf_synced(bed), 30, "the ssconf files on every node")
    result = bed.gnt("cluster", "verify", "--error-codes", *args)
    assert "Traceback" not in result.stderr, result.stderr
    lines = [STAMP.sub("", line).strip() for line in result.stdout.splitlines()]
    found = [line for line in lines if line.startswith(("- ERROR", "- WARNING"))]
    return result.returncode, found, lines


def assert_clean(bed: testbed.Testbed) -> None:
    rc, found, lines = verify(bed)
    assert (rc, found) == (0, []), lines


def node(bed: testbed.Testbed, name: str) -> testbed.BedNode:
    return bed.node(name)


def fake_state(bed: testbed.Testbed, name: str) -> Path:
    return node(bed, name).paths.run_dir / "fake-hypervisor"


def test_three_nodes_verify_clean(bed: testbed.Testbed) -> None:
    rc, found, lines = verify(bed, "--verbose")
    assert (rc, found) == (0, []), lines
    for name, kind in ((NODE1, "master"), (NODE2, "master candidate"), (NODE3, "master candidate")):
        assert f"* Verifying node {name} ({kind})" in lines
    assert "* Verifying configuration file consistency" in lines
    # Ganeti's note: a file-disk instance cannot fail over.
    assert "- NOTICE: 1 non-redundant instance(s) found." in lines
    plain = bed.gnt("cluster", "verify")
    assert plain.returncode == 0 and " - ERROR" not in plain.stdout


def test_changed_and_missing_ssconf_files(bed: testbed.Testbed) -> None:
    changed = node(bed, NODE2).paths.ssconf_file("cluster_tags")
    missing = node(bed, NODE3).paths.ssconf_file("master_ip")
    saved = changed.read_bytes(), missing.read_bytes()
    changed.chmod(0o644)
    changed.write_text("not-a-tag\n")
    missing.unlink()
    try:
        rc, found, lines = verify(bed, sync=False)
        # Ganeti numbers the variants in the order of their checksums.
        variants = sorted([(sha1(saved[0]), f"{NODE1}, {NODE3}"), (sha1(b"not-a-tag\n"), NODE2)])
        prefix = "- ERROR:ECLUSTERFILECHECK:cluster:None:File /var/lib/ganeti/"
        assert sorted(found) == [
            f"{prefix}ssconf_cluster_tags found with 2 different checksums"
            f" (variant 1 on {variants[0][1]}; variant 2 on {variants[1][1]})",
            f"{prefix}ssconf_master_ip is missing from node(s) {NODE3}",
        ], lines
        assert rc == 1
        # Without --error-codes: Ganeti's plain layout.
        plain = bed.gnt("cluster", "verify").stdout
        assert "- ERROR: cluster : File /var/lib/ganeti/ssconf_master_ip is missing" in plain
    finally:
        changed.write_bytes(saved[0])
        missing.write_bytes(saved[1])
    assert_clean(bed)


def restart_noded(bed: testbed.Testbed, name: str, env: dict[str, str] | None = None) -> None:
    """Restart a node's noded (a joined node: no token needed)."""
    bed_node = node(bed, name)
    assert stop_daemon(bed_node.paths, NODED)
    cmd = [sys.executable, "-m", "corral.daemons.noded", "-b", bed_node.address,
           "-p", str(bed.port)]  # fmt: skip
    start_daemon(cmd, {**testbed.daemon_env(bed_node.paths), **(env or {})}, timeout=60)


def test_node_certificate_not_under_the_cluster_ca(bed: testbed.Testbed, tmp_path: Path) -> None:
    paths = node(bed, NODE3).paths
    saved = paths.server_pem.read_bytes()
    foreign = Paths(tmp_path / "foreign")
    foreign.data_dir.mkdir(parents=True)
    ca_cert, ca_key = make_ca("other.example.com", 30)
    write_node_cert(foreign, ca_cert, ca_key, NODE3, node(bed, NODE3).address)
    shutil.copy2(foreign.server_pem, paths.server_pem)
    try:
        # noded still serves with the certificate it loaded: it answers and says so.
        rc, found, lines = verify(bed)
        assert found == [
            f"- ERROR:ENODESETUP:node:{NODE3}:node setup error: Certificate"
            " /var/lib/ganeti/server.pem is not signed by the cluster CA"
        ], lines
        assert rc == 1
        # Restarted, it presents that certificate: the master cannot talk to it at all.
        restart_noded(bed, NODE3)
        rc, found, lines = verify(bed, sync=False)
        assert rc == 1
        rpc = [x for x in found if x.startswith(f"- ERROR:ENODERPC:node:{NODE3}:")]
        assert len(rpc) == 1 and "certificate verify failed" in rpc[0], lines
        assert (
            f"- ERROR:ENODEFILECHECK:node:{NODE3}:Node did not return file checksum data" in found
        )
        assert len(found) == 3 and found[2].startswith(f"- ERROR:ENODEHOOKS:node:{NODE3}:"), lines
    finally:
        paths.server_pem.write_bytes(saved)
        restart_noded(bed, NODE3)
    assert_clean(bed)


def test_instance_running_on_the_wrong_node(bed: testbed.Testbed) -> None:
    state = fake_state(bed, NODE2) / RUN_INST
    stray = fake_state(bed, NODE3) / RUN_INST
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_bytes(state.read_bytes())
    try:
        rc, found, lines = verify(bed)
        text = f"instance should not run on node {NODE3}"
        assert found == [f"- ERROR:EINSTANCEWRONGNODE:instance:{RUN_INST}:{text}"], lines
        assert rc == 1
    finally:
        stray.unlink()
    assert_clean(bed)


def test_admin_up_instance_not_running(bed: testbed.Testbed) -> None:
    state = fake_state(bed, NODE2) / RUN_INST
    saved = state.read_bytes()
    state.unlink()
    try:
        rc, found, lines = verify(bed)
        assert found == [
            f"- ERROR:EINSTANCEDOWN:instance:{RUN_INST}:instance not running on its primary"
            f" node {NODE2}"
        ], lines
        assert rc == 1
    finally:
        state.write_bytes(saved)
    assert_clean(bed)


def test_orphan_file_disk_on_another_node(bed: testbed.Testbed) -> None:
    stray = node(bed, NODE3).paths.file_storage_dir / "gone.example.com" / "x.file.disk0"
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"x")
    try:
        rc, found, lines = verify(bed)
        wire = "/srv/ganeti/file-storage/gone.example.com/x.file.disk0"
        assert found == [f"- WARNING:ENODEORPHANLV:node:{NODE3}:volume {wire} is unknown"], lines
        assert rc == 0  # a warning, as in Ganeti
    finally:
        shutil.rmtree(stray.parent)
    assert_clean(bed)


def disk_file(bed: testbed.Testbed) -> Path:
    (disk,) = (node(bed, NODE2).paths.file_storage_dir / FILE_INST).iterdir()
    return disk


def test_missing_and_too_small_disk(bed: testbed.Testbed) -> None:
    disk = disk_file(bed)
    wire = node(bed, NODE2).paths.to_wire(disk)
    aside = disk.with_name("aside")
    disk.rename(aside)
    try:
        rc, found, lines = verify(bed)
        assert found[0] == (
            f"- ERROR:EINSTANCEMISSINGDISK:instance:{FILE_INST}:volume {wire} missing on node"
            f" {NODE2}"
        ), lines
        # The file put aside is, for verify, a file no instance owns.
        assert found[1:] == [
            f"- WARNING:ENODEORPHANLV:node:{NODE2}:volume {wire.rsplit('/', 1)[0]}/aside is unknown"
        ], lines
        assert rc == 1
        aside.rename(disk)
        os.truncate(disk, 4 * 1024 * 1024)
        rc, found, lines = verify(bed)
        assert found == [
            f"- ERROR:EINSTANCEFAULTYDISK:instance:{FILE_INST}:couldn't retrieve status for"
            f" disk/0 on {NODE2}: disk disk/0 has 4 MiB, not 16 MiB"
        ], lines
        assert rc == 1
    finally:
        if aside.exists():
            aside.rename(disk)
        os.truncate(disk, 16 * 1024 * 1024)
    assert_clean(bed)


def test_os_version_differs_on_one_node(bed: testbed.Testbed) -> None:
    version = node(bed, NODE3).paths.os_search_path[0] / "plain" / "os_version"
    version.write_text("2.0\n")
    try:
        rc, found, lines = verify(bed)
        assert found == [
            f"- ERROR:ENODEOS:node:{NODE3}:OS os_version for plain differs from reference"
            f" node {NODE1}: [2.0] vs. []"
        ], lines
        assert rc == 1
    finally:
        version.unlink()
    assert_clean(bed)


def test_node_with_a_skewed_clock(bed: testbed.Testbed, tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(SKEW_MODULE)
    env = testbed.daemon_env(node(bed, NODE2).paths)
    skewed = {
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{env['PYTHONPATH']}",
        "CORRAL_TEST_CLOCK_SHIFT": "3600",
    }
    restart_noded(bed, NODE2, skewed)
    try:
        rc, found, lines = verify(bed)
        assert len(found) == 1, lines
        assert re.fullmatch(
            rf"- ERROR:ENODETIME:node:{NODE2}:Node time diverges by at least 3\d\d\d\.\ds"
            " from master node time",
            found[0],
        ), lines
        assert rc == 1
    finally:
        restart_noded(bed, NODE2)
    assert_clean(bed)


def test_unreachable_node_reported_by_the_deadline(bed: testbed.Testbed) -> None:
    pid = running_pid(node(bed, NODE3).paths.pid_file(NODED))
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        rc, found, lines = verify(bed)
        elapsed = time.monotonic() - started
        assert rc == 1
        # Not reached: no answer, no file data, no hooks run there.
        codes = [x.split(":", 4)[1:4] for x in found]
        assert sorted(codes) == [
            [code, "node", NODE3] for code in ("ENODEFILECHECK", "ENODEHOOKS", "ENODERPC")
        ], lines
        # One deadline for all of verify's node calls, not a call's own 15 minutes.
        assert elapsed < DEFAULT_QUERY_DEADLINE + 60, elapsed
    finally:
        os.kill(pid, signal.SIGCONT)
    assert_clean(bed)


# Last: it leaves node3 offline (the bed is not used after it).
def test_drained_node_checked_offline_node_skipped(bed: testbed.Testbed) -> None:
    gnt_ok(bed, "node", "modify", "--drained", "yes", NODE3)
    # Draining demotes node3: the RAPI key, for master candidates only, must not be there.
    key = node(bed, NODE3).paths.rapi_pem
    key.write_bytes(bed.master.paths.rapi_pem.read_bytes())
    rc, found, lines = verify(bed, "--verbose")
    assert found == [
        "- ERROR:ECLUSTERFILECHECK:cluster:None:File /var/lib/ganeti/rapi.pem should not exist"
        f" on node(s) {NODE3}"
    ], lines
    assert rc == 1
    assert f"* Verifying node {NODE3} (drained)" in lines
    key.unlink()
    rc, found, lines = verify(bed, "--verbose")
    assert (rc, found) == (0, []), lines
    assert "- NOTICE: 1 drained node(s) found." in lines

    gnt_ok(bed, "node", "modify", "--offline", "yes", NODE3)
    pid = running_pid(node(bed, NODE3).paths.pid_file(NODED))
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # an offline node is not asked at all
    try:
        rc, found, lines = verify(bed, "--verbose", sync=False)
        assert (rc, found) == (0, []), lines
        assert f"* Skipping offline node {NODE3}" in lines
        assert "- NOTICE: 1 offline node(s) found." in lines
    finally:
        os.kill(pid, signal.SIGCONT)
