"""kvm instances through a real cluster (masterd + noded, gnt-* commands),
real QEMU guests under TCG."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.node.hypervisor.kvm.hypervisor import KVM_PATH_ENV
from corral.node.hypervisor.kvm.runtime import Layout
from corral.process.daemons import running_pid, start_daemon
from tests.helpers.cluster import TestCluster, new_root
from tests.helpers.instances import add, ok, rows
from tests.helpers.kvm_guest import MARKER, short_root
from tests.helpers.kvm_guest import kvm_cluster as kvm_guest_cluster
from tests.helpers.serial_console import SerialConsole
from tests.helpers.waiting import wait_until

COUNT = "CORRAL-GUEST-COUNT"


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    with short_root("kvm") as root:
        yield root


@pytest.fixture
def kvm_cluster() -> Iterator[TestCluster]:
    with kvm_guest_cluster("kvm", "corral.counter=1") as cl:
        yield cl


def add_guest(cl: TestCluster, name: str, *args: str) -> None:
    ok(
        add(
            cl, name, "-t", "diskless", "-o", "tiny+default", "--no-nics", "-B", "memory=128", *args
        )
    )


def console(cl: TestCluster, name: str) -> SerialConsole:
    return SerialConsole(Layout(cl.paths.run_dir).serial(name))


def qemu_pid(cl: TestCluster, name: str) -> int:
    runtime = Layout(cl.paths.run_dir).read_runtime(name)
    assert runtime is not None, f"{name} has no runtime file"
    return runtime.pid


def runs(pid: int) -> bool:
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return stat_line[stat_line.rindex(b")") + 2 :].split()[0] not in (b"Z", b"X")


@pytest.mark.slow
def test_life_cycle(kvm_cluster: TestCluster) -> None:
    cl = kvm_cluster
    add_guest(cl, "inst1")
    serial = console(cl, "inst1")
    serial.wait_for(COUNT)  # the guest runs (and acpid with it)
    assert rows(cl, ["status", "oper_state"], "inst1") == [["running", "Y"]]
    pid = qemu_pid(cl, "inst1")

    ok(cl.gnt("instance", "shutdown", "--timeout=60", "inst1"))
    serial.wait_for("CORRAL-GUEST-ACPI-POWEROFF")
    serial.close()
    assert rows(cl, ["status"], "inst1") == [["ADMIN_down"]]
    assert not runs(pid) and Layout(cl.paths.run_dir).names() == []

    ok(cl.gnt("instance", "startup", "inst1"))
    serial = console(cl, "inst1")
    serial.wait_for(COUNT)
    pid = qemu_pid(cl, "inst1")
    ok(cl.gnt("instance", "reboot", "--type=soft", "inst1"))
    serial.wait_for(MARKER)  # booted again, in the same QEMU
    serial.wait_for(COUNT)
    assert qemu_pid(cl, "inst1") == pid

    ok(cl.gnt("instance", "reboot", "--type=hard", "--shutdown-timeout=60", "inst1"))
    serial.close()
    assert not runs(pid) and runs(qemu_pid(cl, "inst1"))
    assert rows(cl, ["status"], "inst1") == [["running"]]
    serial = console(cl, "inst1")
    serial.wait_for(COUNT)  # the new QEMU's guest runs
    ok(cl.gnt("instance", "remove", "-f", "inst1"))
    serial.wait_for("CORRAL-GUEST-ACPI-POWEROFF")
    serial.close()
    assert Layout(cl.paths.run_dir).names() == []


@pytest.mark.slow
def test_noded_killed_and_restarted_finds_the_guest(kvm_cluster: TestCluster) -> None:
    cl = kvm_cluster
    add_guest(cl, "inst1")
    serial = console(cl, "inst1")
    serial.wait_for(COUNT)
    pid = qemu_pid(cl, "inst1")

    noded = running_pid(cl.paths.pid_file("corral-noded"))
    assert noded is not None
    os.kill(noded, signal.SIGKILL)
    wait_until(lambda: running_pid(cl.paths.pid_file("corral-noded")) is None, 15, "noded gone")
    serial.wait_for(COUNT)  # the guest runs on, unaware
    start_daemon(
        [
            sys.executable,
            "-m",
            "corral.daemons.noded",
            "--bind",
            cl.node_ip,
            "--port",
            str(cl.port),
        ],
        cl.env,
        timeout=30,
    )
    assert rows(cl, ["status", "oper_state"], "inst1") == [["running", "Y"]]
    assert qemu_pid(cl, "inst1") == pid and runs(pid)  # nothing restarted
    serial.wait_for(COUNT)
    # Its monitor is back: the clean shutdown goes through QMP and ACPI.
    ok(cl.gnt("instance", "shutdown", "--timeout=60", "inst1"))
    serial.wait_for("CORRAL-GUEST-ACPI-POWEROFF")
    serial.close()
    assert not runs(pid)


def test_kvm_not_offered_without_qemu(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KVM_PATH_ENV, "/nonexistent/qemu")
    cl = new_root(short_tmp)
    try:
        result = cl.init("--enabled-hypervisors=kvm")
        assert result.rc != 0
        assert "Cannot enable hypervisor 'kvm'" in result.stderr
        assert "kvm is not offered: the QEMU binary /nonexistent/qemu is missing" in result.stderr
    finally:
        cl.stop()


def test_instances_get_network_ports_as_ganeti(kvm_cluster: TestCluster) -> None:
    # Ganeti gives kvm instances ports from 11000 on (their VNC display is port - 5900).
    cl = kvm_cluster
    add_guest(cl, "inst1", "--no-start")
    add_guest(cl, "inst2", "--no-start")
    assert rows(cl, ["name", "network_port"]) == [["inst1", "11000"], ["inst2", "11001"]]


def test_node_side_parameter_check_refuses_a_missing_kernel(kvm_cluster: TestCluster) -> None:
    cl = kvm_cluster
    result = add(
        cl, "inst1", "-t", "diskless", "-o", "tiny+default", "--no-nics",
        "-H", "kvm:kernel_path=/nonexistent/vmlinuz",
    )  # fmt: skip
    assert result.rc != 0
    assert "Hypervisor parameter validation failed on node" in result.stderr
    assert "kernel_path '/nonexistent/vmlinuz'" in result.stderr
    assert rows(cl, ["name"]) == []


@pytest.mark.slow
@pytest.mark.parametrize(("allowed", "status"), [(True, "USER_down"), (False, "ERROR_down")])
def test_guest_poweroff_is_a_user_shutdown(
    kvm_cluster: TestCluster, allowed: bool, status: str
) -> None:
    cl = kvm_cluster
    ok(cl.gnt("cluster", "modify", f"--user-shutdown={'yes' if allowed else 'no'}"))
    hvparams = "kvm:user_shutdown=true,kernel_args=corral.poweroff=1"
    add_guest(cl, "inst1", "--no-start", "-H", hvparams)
    ok(cl.gnt("instance", "startup", "inst1"))
    serial = console(cl, "inst1")
    pid = qemu_pid(cl, "inst1")
    serial.wait_for("CORRAL-GUEST-POWEROFF")
    serial.close()
    wait_until(lambda: not runs(pid), 60, "QEMU ends after the guest's poweroff")
    assert rows(cl, ["status", "admin_state"], "inst1") == [[status, "up"]]
    # Started again through Corral, it runs (the node forgets the shutdown).
    ok(cl.gnt("instance", "startup", "inst1"))
    assert rows(cl, ["status"], "inst1") == [["running"]]
    ok(cl.gnt("instance", "shutdown", "--timeout=0", "inst1"))
