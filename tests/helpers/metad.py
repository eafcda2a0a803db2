"""corral-metad's tests and benchmark: a sample instance's metadata (a private
and a secret parameter and user-data whose values are easy to search for), and
guests behind routed veths in namespaces of the test's own."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from corral.metad.model import METADATA_ADDRESS, InstanceMetadata, Nic, UserData
from corral.osdef.spec import OsParam, OsSpec, Visibility
from corral.paths import Paths
from corral.process.daemons import start_daemon, stop_daemon

PRIVATE_VALUE = "private-value-7f3a"
SECRET_VALUE = "secret-value-c91e"
USER_DATA = b"#cloud-config\nruncmd: [echo user-data-marker-5d2b]\n"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOnly test@corral"


def sample(
    name: str = "inst1.example.com",
    *,
    installing: bool = False,
    ip: str = "10.20.0.5",
    comm_ip: str = "169.254.1.5",
    **extra: object,
) -> InstanceMetadata:
    """An instance with a public, a private and a secret OS parameter, two NICs
    (a static one and the communication NIC), user-data and an SSH key."""
    params = {
        "release": OsParam.of("bookworm", Visibility.PUBLIC),
        "token": OsParam.of(PRIVATE_VALUE, Visibility.PRIVATE),
        "password": OsParam.of(SECRET_VALUE, Visibility.SECRET),
    }
    nics = (
        Nic("AA:00:00:00:00:01", ip, "10.20.0.0/24", "10.20.0.1", "main"),
        Nic("aa:00:00:00:00:02", comm_ip, None, None, f"ganeti:communication:{name}"),
    )
    return InstanceMetadata(
        name=name,
        uuid="5e0b2c4e-0000-4000-8000-000000000001",
        hostname=name.split(".")[0],
        os=OsSpec("debootstrap+default", params),
        nics=nics,
        user_data=UserData(USER_DATA),
        ssh_keys=(SSH_KEY,),
        installing=installing,
        **extra,  # type: ignore[arg-type]
    )


def ip(*args: str) -> None:
    """Run ``ip`` with ``args``; CalledProcessError with its output if it fails."""
    subprocess.run(["ip", *args], check=True, capture_output=True)


def plug(node: str, guest: str, tap: str, inside: str, address: str, metric: int = 0) -> None:
    """A routed veth as a communication NIC's tap: ``tap`` in the namespace
    ``node`` carries 169.254.169.254/32 and a /32 route to ``address``, which
    ``inside`` holds in the namespace ``guest``.  The node's reverse-path filter
    is off on it: forged packets must reach metad, whose check is under test."""
    ip("-n", node, "link", "add", tap, "type", "veth", "peer", "name", inside, "netns", guest)
    ip("-n", node, "addr", "add", f"{METADATA_ADDRESS}/32", "dev", tap)
    ip("-n", node, "link", "set", tap, "up")
    ip("-n", node, "route", "add", f"{address}/32", "dev", tap)
    ip("netns", "exec", node, "sysctl", "-qw", f"net.ipv4.conf.{tap}.rp_filter=0")
    ip("-n", guest, "addr", "add", f"{address}/32", "dev", inside)
    ip("-n", guest, "link", "set", inside, "up")
    route = ["route", "add", f"{METADATA_ADDRESS}/32", "dev", inside, "metric", str(metric)]
    ip("-n", guest, *route)


def prepare_node(node: str, *guests: str) -> None:
    """Loopback up everywhere; the node's reverse-path filter off by default."""
    for ns in (node, *guests):
        ip("-n", ns, "link", "set", "lo", "up")
    for key in ("all", "default"):
        ip("netns", "exec", node, "sysctl", "-qw", f"net.ipv4.conf.{key}.rp_filter=0")


@contextlib.contextmanager
def running_metad(node: str, root: Path, *args: str) -> Iterator[Paths]:
    """corral-metad started in the namespace ``node`` with ``root`` as its
    CORRAL_ROOT, stopped (by its pid file) on exit."""
    paths = Paths(root)
    binary = Path(sys.executable).with_name("corral-metad")
    start_daemon(["ip", "netns", "exec", node, str(binary), *args], {"CORRAL_ROOT": str(root)})
    try:
        yield paths
    finally:
        stop_daemon(paths, "corral-metad")
