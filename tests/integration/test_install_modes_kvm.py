"""design-os's install modes on a real kvm cluster (TCG guests):

- ``install``: an untrusted OS (``create_untrusted`` only) installs inside the
  instance's helper VM, booted from the cluster's install image (built by
  scripts/build-install-image's builder); the personalization package is
  overlaid there; the guest then boots from what it wrote.
- bad input creates nothing and says why: no install image, an untrusted OS
  refused the helper VM, a helper VM that never powers off.
- ``self_install``: the first start uses the install hypervisor parameters,
  the next one the instance's own.
- ``use_namespaces``: the helper VM's QEMU runs in namespaces of its own,
  its install image bound into its mount namespace.

The cluster's daemons (and so its taps and metad) run in a network namespace
of the test's own; the cluster is shared by the module's tests.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import subprocess
import tarfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from corral.node.helper_vm import INSTALLER_DRIVE
from corral.node.hypervisor.kvm.runtime import Layout, Runtime
from tests.helpers.appliance import identity_of, install_image
from tests.helpers.cluster import TestCluster, new_root
from tests.helpers.instances import add, failed, ok, rows
from tests.helpers.kvm_guest import cluster_hvparams, kill_leftovers, short_root
from tests.helpers.leaks import files_holding
from tests.helpers.media_server import MediaServer, media_server
from tests.helpers.netns_thread import NamespaceThread
from tests.helpers.osdef import make_os
from tests.helpers.serial_console import SerialConsole
from tests.helpers.waiting import wait_until

UNTRUSTED = "untrusted"
HANGING = "hanging"
SECRET = "s3cr3t-never-on-disk"
# create_untrusted, run by the appliance: an ext2 file system on disk 0 (the
# test guest's init finds it there) whose marker says where the script ran:
# /etc/corral-appliance exists in the appliance only (set -e: fails elsewhere).
CREATE_UNTRUSTED = """#!/bin/sh
set -eu
appliance=$(cat /etc/corral-appliance)
echo "making ext2 on $DISK_0_PATH"
mke2fs -F "$DISK_0_PATH" >/dev/null
mount -t ext2 "$DISK_0_PATH" /mnt
printf '%s\\n' "ran-in:$appliance:$(hostname):marker=$OSP_MARKER:secret-length=${#OSP_PASSWORD}" \\
  >/mnt/corral-disk-marker
umount /mnt
echo "disk 0 written"
"""
HANGING_CREATE = """#!/bin/sh
echo "working forever"
exec sleep 100000
"""
FAILING = "failing"
FAILING_CREATE = """#!/bin/sh
echo "cannot install: the mirror is gone" >&2
exit 3
"""
# Started with corral.reboot=1, the test guest writes the disk's boot-count + 1
# back: the package's 41 makes its first boot 42.
PACKAGE_BOOTS = 41


def _package() -> bytes:
    data = f"{PACKAGE_BOOTS}\n".encode()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("boot-count")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue())


def _untrusted_os(cl: TestCluster, name: str, create: str) -> None:
    """An OS with ``create_untrusted`` and no ``create``."""
    os_dir = make_os(cl.paths, name, parameters={"marker": "m", "password": "p"})
    (os_dir / "create").unlink()
    script = os_dir / "create_untrusted"
    script.write_text(create)
    script.chmod(0o755)


_NAMESPACE: list[NamespaceThread] = []  # the module cluster's (one at a time)


@contextmanager
def served(tmp_path: Path, name: str, data: bytes) -> Iterator[MediaServer]:
    """``data`` served as ``name`` on the loopback of the cluster's namespace."""
    (tmp_path / name).write_bytes(data)
    ns = _NAMESPACE[-1]
    server = media_server()
    state = ns.call(server.__enter__)
    state.files["/" + name] = tmp_path / name
    try:
        yield state
    finally:
        ns.call(server.__exit__, None, None, None)


@pytest.fixture(scope="module")
def cluster() -> Iterator[TestCluster]:
    """A kvm cluster in a namespace of its own, with instance communication
    and the install appliance as its install image."""
    image = install_image()
    with NamespaceThread() as ns, short_root("inm") as root:
        ns.call(subprocess.run, ["ip", "link", "set", "lo", "up"], check=True)
        cl = new_root(root)
        init = ("--enabled-hypervisors=kvm", "-H", f"kvm:{cluster_hvparams()}")
        result = ns.call(cl.init, *init)
        _NAMESPACE.append(ns)
        try:
            assert result.rc == 0, result.stderr
            _untrusted_os(cl, UNTRUSTED, CREATE_UNTRUSTED)
            _untrusted_os(cl, HANGING, HANGING_CREATE)
            _untrusted_os(cl, FAILING, FAILING_CREATE)
            make_os(cl.paths, "tiny")
            ok(cl.gnt("cluster", "modify", "--instance-communication-network=commnet"))
            ok(cl.gnt("cluster", "modify", f"--install-image={image}"))
            yield cl
        finally:
            kill_leftovers(cl.paths.run_dir)
            cl.stop()
            _NAMESPACE.pop()


def ask(console: SerialConsole, command: str, tag: str, timeout: float = 120) -> str:
    """What ``command`` prints in the guest's shell, typed again every few
    seconds until the shell (which may not run yet) answers."""
    pattern = re.compile(rf"\n{tag}-BEGIN\r?\n(.*?)\r?\n{tag}-END\r?\n", re.S)
    deadline = time.monotonic() + timeout
    while True:
        console.sock.sendall(f"echo {tag}-BEGIN; {command}; echo {tag}-END\n".encode())
        try:
            return console.wait_for(pattern, timeout=5).group(1).replace("\r", "")
        except AssertionError:
            if time.monotonic() > deadline:
                raise


def leftovers(cl: TestCluster, name: str) -> list[str]:
    """What an instance that was not created must not have left on the node."""
    found = [str(p) for p in cl.paths.file_storage_dir.glob(f"{name}*")]
    found += [f"guest {n}" for n in Layout(cl.paths.run_dir).names()]
    helper = cl.paths.run_dir / "helper-vm" / name
    if helper.exists():
        found.append(str(helper))
    return found


@pytest.mark.slow
def test_untrusted_os_installs_in_the_helper_vm(cluster: TestCluster, tmp_path: Path) -> None:
    cl = cluster
    with served(tmp_path, "package.tar.gz", _package()) as server:
        _install_and_reinstall(cl, server)


def _install_and_reinstall(cl: TestCluster, server: MediaServer) -> None:
    """Add inst1 of the untrusted OS (its package from ``server``), look at
    what its helper VM wrote, reinstall it, look again."""
    out = ok(
        add(cl, "inst1", "-t", "file", "--disk", "0:size=16M", "-o", f"{UNTRUSTED}+default",
            "--no-nics", "-c", "yes", "-B", "memory=128",
            "-H", "kvm:kernel_args=quiet corral.reboot=1",
            "-O", f"marker=hello,os-package={server.url('/package.tar.gz')}",
            "--os-parameters-secret", f"password={SECRET}")
    )  # fmt: skip
    # The job log: the helper VM's own reports, relayed by metad.
    assert "Running OS create script: Helper VM is up" in out
    assert f"helper VM up ({identity_of(install_image())}" in out
    assert "create_untrusted: disk 0 written" in out
    assert "personalization package unpacked over disk 0 (1 entries)" in out
    assert "Running OS create script: Helper VM execution completed" in out
    # No OS script ran on the node: noded logs each run it makes.
    assert list((cl.paths.log_dir / "os").glob(f"*{UNTRUSTED}*")) == []
    assert not (cl.paths.run_dir / "helper-vm" / "inst1").exists()
    # The secret parameter reached the script through metad's memory only.
    assert files_holding(cl.paths.root, SECRET) == []

    console = SerialConsole(Layout(cl.paths.run_dir).serial("inst1"))
    try:
        marker = ask(console, "cat /mnt/disk/corral-disk-marker", "MARKER")
        # Written by the create script in the appliance (its identity, its host
        # name), with the public and the secret parameters it was given.
        assert marker == (
            f"ran-in:{identity_of(install_image())}:corral-installer"
            f":marker=hello:secret-length={len(SECRET)}"
        )
        # The package's boot count, overlaid after the script, counted on by the guest.
        assert ask(console, "cat /mnt/disk/boot-count", "BOOTS") == str(PACKAGE_BOOTS + 1)
    finally:
        console.close()
    assert rows(cl, ["status"], "inst1") == [["running"]]

    # A reinstall runs in a helper VM again, with new parameters (the secret
    # one given again), and fetches the package again.
    ok(cl.gnt("instance", "shutdown", "--timeout=0", "inst1"))
    out = ok(
        cl.gnt("instance", "reinstall", "-f", "-O", "marker=again",
               "--os-parameters-secret", "password=x", "inst1")
    )  # fmt: skip
    assert "create_untrusted: disk 0 written" in out
    assert server.whole_fetches("/package.tar.gz") == 2
    ok(cl.gnt("instance", "startup", "inst1"))
    console = SerialConsole(Layout(cl.paths.run_dir).serial("inst1"))
    try:
        marker = ask(console, "cat /mnt/disk/corral-disk-marker", "AGAIN")
        assert marker.endswith(":marker=again:secret-length=1")
    finally:
        console.close()
    ok(cl.gnt("instance", "remove", "-f", "inst1"))


def test_untrusted_os_needs_an_install_image(cluster: TestCluster) -> None:
    cl = cluster
    image = install_image()
    ok(cl.gnt("cluster", "modify", "--install-image="))
    try:
        failed(
            add(cl, "inst2", "-t", "file", "--disk", "0:size=16M", "-o", f"{UNTRUSTED}+default",
                "--no-nics", "-c", "yes", "-O", "marker=x"),
            "Cannot create install instance because an install image has not been specified",
            "gnt-cluster modify --install-image",
        )  # fmt: skip
    finally:
        ok(cl.gnt("cluster", "modify", f"--install-image={image}"))
    assert rows(cl, [], "inst2") == [] and leftovers(cl, "inst2") == []


def test_untrusted_os_refused_outside_the_helper_vm(cluster: TestCluster) -> None:
    cl = cluster
    failed(
        add(cl, "inst3", "-t", "file", "--disk", "0:size=16M", "-o", f"{UNTRUSTED}+default",
            "--no-nics", "-c", "yes", "-O", "marker=x", "--enable-safe-install=no"),
        f"OS '{UNTRUSTED}+default' is not trusted",
        "can be installed only in the helper VM",
    )  # fmt: skip
    failed(
        add(cl, "inst3", "-t", "file", "--disk", "0:size=16M", "-o", f"{UNTRUSTED}+default",
            "--no-nics", "-O", "marker=x"),
        "needs the instance communication NIC",
    )  # fmt: skip
    assert rows(cl, [], "inst3") == [] and leftovers(cl, "inst3") == []


@pytest.mark.slow
def test_helper_vm_that_never_powers_off_is_killed(cluster: TestCluster) -> None:
    cl = cluster
    result = add(
        cl, "inst4", "-t", "file", "--disk", "0:size=16M", "-o", f"{HANGING}+default",
        "--no-nics", "-c", "yes", "-B", "memory=128", "--helper-shutdown-timeout=2",
    )  # fmt: skip
    assert "create_untrusted: working forever" in result.stdout
    assert "Helper VM has not finished within the timeout; shutting it down forcibly" in (
        result.stdout + result.stderr
    )
    failed(result, "Error running helper VM with image")
    assert rows(cl, [], "inst4") == [] and leftovers(cl, "inst4") == []


@pytest.mark.slow
def test_a_failing_create_script_fails_the_add_and_says_why(cluster: TestCluster) -> None:
    cl = cluster
    result = add(
        cl, "inst6", "-t", "file", "--disk", "0:size=16M", "-o", f"{FAILING}+default",
        "--no-nics", "-c", "yes", "-B", "memory=128",
    )  # fmt: skip
    assert "create_untrusted: cannot install: the mirror is gone" in result.stdout
    failed(result, "the helper VM reported: failed: create_untrusted exited with code 3")
    assert rows(cl, [], "inst6") == [] and leftovers(cl, "inst6") == []


def test_a_helper_vm_that_does_not_start_in_time_is_killed(cluster: TestCluster) -> None:
    cl = cluster
    failed(
        add(cl, "inst7", "-t", "file", "--disk", "0:size=16M", "-o", f"{HANGING}+default",
            "--no-nics", "-c", "yes", "-B", "memory=128", "--helper-startup-timeout=0"),
        "Running OS create script: Could not boot instance using image",
    )  # fmt: skip
    assert rows(cl, [], "inst7") == [] and leftovers(cl, "inst7") == []


@pytest.mark.slow
def test_self_install_uses_the_install_parameters_for_the_first_start_only(
    cluster: TestCluster,
) -> None:
    cl = cluster
    ok(
        add(cl, "inst5", "-t", "diskless", "-o", "tiny+default", "--no-nics", "-B", "memory=128",
            "-H", "kvm:kernel_args=quiet corral.hostname=running",
            "-O", "install-hv-kernel_args=quiet corral.hostname=installing")
    )  # fmt: skip
    layout = Layout(cl.paths.run_dir)
    console = SerialConsole(layout.serial("inst5"))
    try:
        assert ask(console, "hostname", "FIRST") == "installing"
    finally:
        console.close()
    ok(cl.gnt("instance", "shutdown", "--timeout=0", "inst5"))
    ok(cl.gnt("instance", "startup", "inst5"))
    console = SerialConsole(layout.serial("inst5"))
    try:
        assert ask(console, "hostname", "SECOND") == "running"
    finally:
        console.close()
    ok(cl.gnt("instance", "remove", "-f", "inst5"))


def _helper_vm(layout: Layout, name: str) -> Runtime | None:
    """The runtime of ``name``'s helper VM (not of the instance) while it runs."""
    runtime = layout.read_runtime(name)
    if runtime is None or f"id={INSTALLER_DRIVE}," not in " ".join(runtime.argv):
        return None
    return runtime


@pytest.mark.slow
def test_helper_vm_in_namespaces_of_its_own(cluster: TestCluster) -> None:
    """use_namespaces: the helper VM's QEMU is in namespaces of its own and
    sees the install image (bound in read-only), none of the node's files;
    the install completes."""
    cl = cluster
    result = add(
        cl, "inst8", "-t", "file", "--disk", "0:size=16M", "-o", f"{UNTRUSTED}+default",
        "--no-nics", "-c", "yes", "-B", "memory=128", "-H", "kvm:use_namespaces=true",
        "-O", "marker=ns", "--os-parameters-secret", "password=x", "--submit",
    )  # fmt: skip
    ok(result)
    match = re.fullmatch(r"JobID: (\d+)\n", result.stderr)
    assert match, result.stderr
    layout = Layout(cl.paths.run_dir)
    wait_until(lambda: _helper_vm(layout, "inst8"), timeout=120, what="the helper VM")
    helper = _helper_vm(layout, "inst8")
    assert helper is not None and helper.namespaces
    assert os.readlink(f"/proc/{helper.pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
    assert os.readlink(f"/proc/{helper.pid}/ns/net") != os.readlink("/proc/self/ns/net")
    for path, there in ((install_image(), 0), (cl.paths.server_pem, 1), ("/etc/passwd", 1)):
        seen = subprocess.run(["nsenter", "-t", str(helper.pid), "-m", "test", "-e", str(path)])
        assert seen.returncode == there, path
    out = ok(cl.gnt("job", "watch", match.group(1)))
    assert "create_untrusted: disk 0 written" in out
    assert rows(cl, ["status"], "inst8") == [["running"]]
    instance = layout.read_runtime("inst8")
    assert instance is not None and instance.namespaces and _helper_vm(layout, "inst8") is None
    ok(cl.gnt("instance", "shutdown", "--timeout=0", "inst8"))
    ok(cl.gnt("instance", "remove", "-f", "inst8"))
