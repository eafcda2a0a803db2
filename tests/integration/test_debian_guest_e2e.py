"""Debian's ``ganeti-instance-debootstrap``, unmodified, through a whole kvm
cluster: ``gnt-instance add -o debootstrap+default`` installs a Debian guest on
a file disk, which boots (direct kernel boot, TCG) to a login prompt read
through ``gnt-instance console``.

The two packages (the OS definition and ``debootstrap``, its dependency) are
unpacked with ``dpkg-deb -x`` into a directory standing for the node's ``/``,
and configured as an administrator would: settings appended to the package's
/etc/default/ganeti-instance-debootstrap.  The scripts use absolute paths
(/etc/default/..., /etc/ganeti/instance-debootstrap/variants, the
``variants.list`` symlink into it, /usr/sbin/debootstrap,
/var/cache/ganeti-instance-debootstrap), so noded runs in a mount namespace of
its own in which the packages' /etc and /usr are read-only overlays on the
host's, and the package's cache directory is ``.cache/guest/debootstrap``'s:
the tarball made by the first run (debootstrap from the mirror: ~1.5 min here) is
reused by later runs on the machine.  The namespace ends with noded.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.process.daemons import start_daemon, stop_daemon
from tests.helpers import debian_guest, guest
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.instances import NO_CHECKS, ok, rows
from tests.helpers.kvm_guest import TCG_KERNEL_ARGS, kill_leftovers
from tests.integration.test_instance_console import ESCAPE, console_process, finish, read_until

NAME = "debian1.example.com"
PACKAGES = (debian_guest.OS_PKG, debian_guest.DEBOOTSTRAP_PKG)
OS_DIR = Path("usr/share/ganeti/os/debootstrap")
DEFAULTS_FILE = Path("etc/default/ganeti-instance-debootstrap")
CACHE_DIR = Path("var/cache/ganeti-instance-debootstrap")
CACHE_FILE = f"cache-{debian_guest.SUITE}-amd64.tar"
# First run: debootstrap from the mirror (~100 MB) plus the guest's boot.
FIRST_RUN_TIMEOUT = 1800


def install_packages(node_root: Path) -> None:
    """Unpack the packages into ``node_root`` and configure the OS definition."""
    for name in PACKAGES:
        deb = guest.fetch_deb(guest.package(name))
        subprocess.run(["dpkg-deb", "-x", str(deb), str(node_root)], check=True)
    # The package's own settings file, edited as its comments tell the administrator.
    with (node_root / DEFAULTS_FILE).open("a") as out:
        out.write(
            "\n# set for Corral's end-to-end test\n"
            f'SUITE="{debian_guest.SUITE}"\n'
            f'MIRROR="{debian_guest.debian_mirror()}"\n'
            'PARTITION_STYLE="none"\n'
        )


# Run as ``sh -c SCRIPT sh NODE_ROOT CACHE TAG noded...``: the mounts, then noded.
# Mounts made in the namespace go with it (when noded and its QEMUs end).
NAMESPACE_SCRIPT = """
set -e
root=$1 cache=$2 tag=$3
shift 3
mount -t overlay "corral-etc-$tag" -o "lowerdir=$root/etc:/etc" /etc
mount -t overlay "corral-usr-$tag" -o "lowerdir=$root/usr:/usr" /usr
mount -t overlay "corral-cache-$tag" -o "lowerdir=$root/var/cache:/var/cache" /var/cache
mount --bind "$cache" /var/cache/ganeti-instance-debootstrap
exec "$@"
"""


def restart_noded_with_packages(cl: TestCluster, node_root: Path) -> None:
    """noded again, in a private mount namespace that sees the packages."""
    cache = debian_guest.CACHE_ROOT / CACHE_DIR.name
    cache.mkdir(parents=True, exist_ok=True)
    stop_daemon(cl.paths, "corral-noded")
    noded = [sys.executable, "-m", "corral.daemons.noded", "--bind", cl.node_ip,
             "--port", str(cl.port)]  # fmt: skip
    namespace = ["unshare", "--mount", "--propagation", "private", "sh", "-c", NAMESPACE_SCRIPT,
                 "sh", str(node_root), str(cache), secrets.token_hex(4)]  # fmt: skip
    start_daemon([*namespace, *noded], cl.env, timeout=60)


def detach_loops(under: Path) -> None:
    """Loop devices left on files below ``under`` by a ``create`` that died halfway."""
    out = subprocess.run(["losetup", "-n", "-l", "-O", "NAME,BACK-FILE"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    for line in out.stdout.splitlines():
        device, _, backing = line.strip().partition(" ")
        if backing.strip().startswith(f"{under}/"):
            subprocess.run(["losetup", "-d", device], check=False)


@pytest.fixture
def debian_cluster() -> Iterator[TestCluster]:
    """A kvm cluster whose node has the two packages, the guest booting with
    the cloud kernel and the test initramfs (which mounts /dev/vda as root)."""
    short = Path(tempfile.mkdtemp(prefix="h9d", dir="/tmp"))  # QEMU's socket paths
    hvparams = ",".join(
        (
            f"kernel_path={guest.guest_kernel()}",
            f"initrd_path={guest.guest_initramfs()}",
            "root_path=/dev/vda",  # PARTITION_STYLE=none: the filesystem is the whole disk
            f"kernel_args=ro corral.boot=root {TCG_KERNEL_ARGS}",
            "kvm_flag=disabled",  # KVM hangs guests on this machine kind
            "serial_speed=115200",
        )
    )
    run_dir = None
    try:
        node_root = short / "node"
        install_packages(node_root)
        with running_cluster(short, "--enabled-hypervisors=kvm", "-H", f"kvm:{hvparams}") as cl:
            run_dir = cl.paths.run_dir
            # Into the cluster's OS search path as the package ships it (symlink included).
            shutil.copytree(node_root / OS_DIR, cl.paths.root / OS_DIR, symlinks=True)
            restart_noded_with_packages(cl, node_root)
            try:
                yield cl
            finally:
                cl.gnt("instance", "remove", "-f", "--shutdown-timeout=0", NAME)
    finally:
        if run_dir is not None:
            kill_leftovers(run_dir)
        detach_loops(short)
        shutil.rmtree(short, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.timeout(FIRST_RUN_TIMEOUT)
def test_debootstrap_guest_boots_to_login_through_the_cluster(
    debian_cluster: TestCluster,
) -> None:
    cl = debian_cluster
    out = ok(cl.gnt("os", "list"))
    assert "debootstrap+default" in out.split()
    tarball = debian_guest.CACHE_ROOT / CACHE_DIR.name / CACHE_FILE
    cached = tarball.is_file()
    ok(
        cl.gnt(
            "instance", "add", *NO_CHECKS, "-t", "file", "-s", "2G", "-o", "debootstrap+default",
            "--no-nics", "-B", "memory=512", "-H", "kvm:serial_console=true", NAME,
            timeout=FIRST_RUN_TIMEOUT,
        ),
    )  # fmt: skip
    assert rows(cl, ["status"], NAME) == [["running"]]
    # The package's cache is ours: a run finds the tarball an earlier one left
    # (no debootstrap then), or debootstraps and leaves it for the next.
    assert tarball.is_file()
    (log,) = (cl.paths.log_dir / "os").glob("add-debootstrap-*.log")
    assert ("Base system installed" in log.read_text()) is not cached
    proc = console_process(cl, NAME)
    assert proc.stdin is not None
    try:
        # Booting, or at the prompt already: an empty login makes getty ask again.
        proc.stdin.write(b"\n")
        proc.stdin.flush()
        seen = read_until(proc, b"debian1 login: ", timeout=300)
        # bookworm (12), from the settings file: the package's default suite is jessie.
        assert b"Debian GNU/Linux 12 debian1.example.com ttyS0" in seen
        proc.stdin.write(ESCAPE)
        proc.stdin.flush()
        rc, err = finish(proc)
        assert rc == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            finish(proc)
