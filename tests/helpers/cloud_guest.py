"""A stock Debian 12 cloud guest: ``debootstrap`` of Debian's packages with
``cloud-init`` and what Debian's genericcloud image carries for it to work
(its cloud kernel and modules, ``openssh-server``, ``ifupdown`` and
``isc-dhcp-client`` from the default variant), and nothing of Corral's.

The image is a raw disk holding one ext4 filesystem (``mkfs.ext4 -d`` of the
debootstrapped tree: no loop device, no mount), cached in ``.cache/guest/``
under a hash of its inputs and built in a temporary directory renamed into
place, as the other guest assets.  Like Debian's cloud images it ships with an
empty machine-id and no SSH host keys (cloud-init makes them at first boot),
hostname ``localhost`` and an fstab mounting the root read-write.

It boots its own kernel and initramfs (Debian's, made by initramfs-tools in
the image), copied out beside the image for QEMU's direct kernel boot: the
test kernel cannot serve, as debootstrap installs the suite's kernel and apt's
index here may hold a newer one (bookworm-security), whose modules the image
would lack.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import debian_guest, guest
from tests.helpers.cluster import TestCluster, new_root
from tests.helpers.instances import ok
from tests.helpers.kvm_guest import TCG_KERNEL_ARGS, kill_leftovers, short_root
from tests.helpers.netns_thread import NamespaceThread
from tests.helpers.osdef import make_os

SUITE = debian_guest.SUITE
# Beyond debootstrap's default variant (which brings ifupdown, isc-dhcp-client).
# debootstrap does not resolve virtual packages: python3-cffi-backend provides
# the cffi API python3-cryptography (cloud-init's) depends on.
PACKAGES = ("cloud-init", "openssh-server", guest.KERNEL_META, "python3-cffi-backend")
IMAGE_MIB = 1536
ROOT = "/dev/vda"  # the filesystem is the whole disk
FSTAB = f"{ROOT} / ext4 rw,discard,errors=remount-ro 0 1\n"
HOSTS = (
    "127.0.0.1\tlocalhost\n"
    "::1\t\tlocalhost ip6-localhost ip6-loopback\n"
    "ff02::1\t\tip6-allnodes\nff02::2\t\tip6-allrouters\n"
)
# Bump when the way the image is made changes (the packages' hashes cover the rest).
IMAGE_VERSION = "1"


def _image_key() -> str:
    mirror = debian_guest.debian_mirror()
    # apt's index here stands for the mirror's: a new cloud-init there, a new image.
    versions = [guest.package(name).sha256 for name in (debian_guest.DEBOOTSTRAP_PKG, "cloud-init")]
    return guest._key(IMAGE_VERSION, SUITE, mirror, *versions, *PACKAGES)


def _debootstrap(target: Path, log: Path) -> None:
    """Debian's base system plus PACKAGES into ``target`` (minutes: a download)."""
    debootstrap = guest.unpack(guest.package(debian_guest.DEBOOTSTRAP_PKG))
    env = {
        "PATH": f"{debootstrap / 'usr' / 'sbin'}:/usr/sbin:/usr/bin:/sbin:/bin",
        "DEBOOTSTRAP_DIR": str(debootstrap / "usr" / "share" / "debootstrap"),
        "DEBIAN_FRONTEND": "noninteractive",
        "LC_ALL": "C.UTF-8",
    }
    command = ["debootstrap", "--arch=amd64", f"--include={','.join(PACKAGES)}",
               SUITE, str(target), debian_guest.debian_mirror()]  # fmt: skip
    with log.open("wb") as out:
        result = subprocess.run(command, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, check=False)  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"debootstrap failed ({result.returncode}): {log.read_text()[-3000:]}")


def _as_a_cloud_image(root: Path) -> None:
    """What Debian's cloud images hold in place of the build host's traces."""
    (root / "etc" / "fstab").write_text(FSTAB)
    (root / "etc" / "hostname").write_text("localhost\n")
    (root / "etc" / "hosts").write_text(HOSTS)
    (root / "etc" / "machine-id").write_text("")
    (root / "var" / "lib" / "dbus" / "machine-id").unlink(missing_ok=True)
    (root / "etc" / "resolv.conf").unlink(missing_ok=True)
    for key in (root / "etc" / "ssh").glob("ssh_host_*"):
        key.unlink()
    shutil.rmtree(root / "var" / "cache" / "apt" / "archives", ignore_errors=True)
    (root / "var" / "cache" / "apt" / "archives" / "partial").mkdir(parents=True)


def _boot_files(root: Path, into: Path) -> None:
    """The image's kernel and initramfs (exactly one of each) copied to ``into``."""
    (kernel,) = (root / "boot").glob("vmlinuz-*")
    (initrd,) = (root / "boot").glob("initrd.img-*")
    shutil.copy2(kernel, into / "vmlinuz")
    shutil.copy2(initrd, into / "initrd.img")


@dataclass(frozen=True)
class CloudGuest:
    """The image and what boots it."""

    image: Path
    kernel: Path
    initrd: Path
    root: str = ROOT


@functools.cache
def cloud_guest() -> CloudGuest:
    """The stock Debian cloud guest (built once, cached)."""
    final = guest.CACHE / f"cloud-debian-{_image_key()}"
    if not final.is_dir():
        with guest._building(final) as tmp:
            tree = tmp / "tree"
            _debootstrap(tree, tmp / "debootstrap.log")
            _boot_files(tree, tmp)
            _as_a_cloud_image(tree)
            image = tmp / "disk.img"
            with image.open("wb") as handle:
                handle.truncate(IMAGE_MIB << 20)
            subprocess.run(
                ["mkfs.ext4", "-q", "-L", "debian-root", "-d", str(tree), str(image)],
                check=True, capture_output=True,
            )  # fmt: skip
            shutil.rmtree(tree)
            os.chmod(image, 0o644)
    return CloudGuest(final / "disk.img", final / "vmlinuz", final / "initrd.img")


# A cluster for it

# The user-data's marker, computed by the guest: the user-data's text never matches.
USER_DATA = (
    '#cloud-config\nruncmd:\n - echo "CORRAL-CLOUD-INIT $(hostname) $((6 * 7))" > /dev/console\n'
)
MARKER = r"CORRAL-CLOUD-INIT (\S+) 42"
NETWORK = "lan"
OS = "noop"  # its create script leaves the written image as it is


@dataclass(frozen=True)
class CloudCluster:
    """A kvm cluster for the cloud guest, in a network namespace of its own."""

    cl: TestCluster
    ns: NamespaceThread
    guest: CloudGuest
    bridge: str  # NETWORK's bridge, holding its gateway's address in the namespace
    key: Path  # an SSH key pair (``key`` and ``key.pub``)

    def add_options(self, address: str, *extra: str, osparams: str = "") -> list[str]:
        """``gnt-instance add`` options of an instance of the image on NETWORK
        at ``address``, with the key and USER_DATA, ``osparams`` added to the
        public OS parameters (``-O`` is given once: a second one would replace
        the first), and ``extra``."""
        public = self.key.with_suffix(".pub").read_text().strip()
        # The command line splits parameters on commas: none in these values.
        params = ",".join(filter(None, (f"os-image={self.guest.image}",
                                        f"ssh-authorized-keys={public}", osparams)))  # fmt: skip
        return ["-t", "file", "-s", "2G", "-o", f"{OS}+default", "-B", "memory=512",
                "--net", f"0:network={NETWORK},ip={address}", "-O", params,
                "--os-parameters-private", f"user-data={USER_DATA}", *extra]  # fmt: skip


def _run(ns: NamespaceThread, *argv: str) -> None:
    ns.call(subprocess.run, list(argv), check=True, capture_output=True)


def gateway(subnet: str) -> str:
    """NETWORK's gateway: the bridge's address in the namespace."""
    return f"{subnet}.1"


def _init(
    ns: NamespaceThread, cl: TestCluster, image: CloudGuest, bridge: str, subnet: str
) -> None:
    hvparams = ",".join(
        (
            f"kernel_path={image.kernel}",
            f"initrd_path={image.initrd}",
            f"root_path={image.root}",
            f"kernel_args=ro {TCG_KERNEL_ARGS}",
            "kvm_flag=disabled",  # KVM hangs guests on this machine kind
            "serial_console=true",
            "serial_speed=115200",
        )
    )
    result = ns.call(cl.init, "--enabled-hypervisors=kvm", "-H", f"kvm:{hvparams}")
    assert result.rc == 0, result.stderr
    make_os(cl.paths, OS, parameters={"token": "a secret the install needs"})
    ok(
        cl.gnt(
            "network", "add", "--network", f"{subnet}.0/24", "--gateway", gateway(subnet), NETWORK
        )
    )
    ok(cl.gnt("network", "connect", "-N", f"mode=bridged,link={bridge}", NETWORK, "default"))
    ok(cl.gnt("cluster", "modify", "--instance-communication-network=commnet"))


@contextlib.contextmanager
def cloud_cluster(prefix: str, subnet: str) -> Iterator[CloudCluster]:
    """A kvm cluster whose daemons live in a namespace of their own (its taps
    carry 169.254.169.254), booting the cloud guest's kernel under TCG, with
    the communication network and NETWORK (``<subnet>.0/24``) on a bridge
    that holds its gateway; its guests killed and everything removed after."""
    image = cloud_guest()
    with NamespaceThread() as ns, short_root(prefix) as root:
        bridge = f"{ns.name[:9]}br"
        _run(ns, "ip", "link", "set", "lo", "up")
        _run(ns, "ip", "link", "add", bridge, "type", "bridge")
        _run(ns, "ip", "addr", "add", f"{gateway(subnet)}/24", "dev", bridge)
        _run(ns, "ip", "link", "set", bridge, "up")
        key = root / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        cl = new_root(root)
        try:
            _init(ns, cl, image, bridge, subnet)
            yield CloudCluster(cl, ns, image, bridge, key)
        finally:
            kill_leftovers(cl.paths.run_dir)
            cl.stop()
