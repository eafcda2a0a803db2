"""The network rules for QEMU's users on a real cluster (masterd, noded, real
TCG guests with ``security_model=pool``), whose daemons live in a network
namespace of the test's own, as its rules do: from inside the guests' QEMU
context (a helper process running as a guest's uid) neither noded, RAPI,
SSH, loopback, the metadata address nor the node's other addresses can be
reached over TCP, and neither masterd's luxi socket nor the guests' QMP
and serial sockets (unix sockets: their directories' permissions); the
guest's own traffic through its tap still flows (it pings a peer on its
bridge); ``gnt-cluster verify`` reports rules deleted by hand, a restarted
noded restores them, and they go with the last guest of their uid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from corral.node.hypervisor.kvm.runtime import Layout, Runtime
from corral.node.netrules import nft
from corral.process.daemons import running_pid, start_daemon
from tests.helpers.cluster import RAPI_PORT, TestCluster, new_root
from tests.helpers.instances import add, ok
from tests.helpers.kvm_guest import cluster_hvparams, kill_leftovers, short_root, unique_uid_pool
from tests.helpers.netns_thread import NamespaceThread
from tests.helpers.netrules import (
    CONNECTED,
    REFUSED_BY_RULES,
    delete_table,
    listeners_in,
    probe,
    table_listing,
)
from tests.helpers.osdef import make_os
from tests.helpers.serial_console import SerialConsole
from tests.helpers.waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]

POOL = unique_uid_pool(5)
BRIDGE = "brguest"
HOST_ON_BRIDGE = "10.213.61.1"  # an address of the node on the guests' bridge
PEER = "10.213.61.2"  # a host on that bridge, in a namespace of its own
GUEST = "10.213.61.3"
METADATA = "169.254.169.254"


@dataclass
class Bed:
    cl: TestCluster
    node: NamespaceThread
    peer: NamespaceThread

    @property
    def table(self) -> str:
        return nft.table_name(self.cl.paths)


def _sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


def _node_network(peer_ns: str) -> None:
    _sh("ip", "link", "set", "lo", "up")
    _sh("ip", "addr", "add", f"{METADATA}/32", "dev", "lo")
    _sh("ip", "link", "add", BRIDGE, "type", "bridge")
    _sh("ip", "addr", "add", f"{HOST_ON_BRIDGE}/24", "dev", BRIDGE)
    _sh("ip", "link", "set", BRIDGE, "up")
    _sh("ip", "link", "add", "vguest", "type", "veth", "peer", "name", "vpeer", "netns", peer_ns)
    _sh("ip", "link", "set", "vguest", "master", BRIDGE, "up")


def _peer_network() -> None:
    _sh("ip", "link", "set", "lo", "up")
    _sh("ip", "addr", "add", f"{PEER}/24", "dev", "vpeer")
    _sh("ip", "link", "set", "vpeer", "up")


@pytest.fixture
def bed() -> Iterator[Bed]:
    with NamespaceThread() as node, NamespaceThread() as peer, short_root("nrc") as root:
        # As / in production: anyone may traverse the root, so what keeps the
        # guests' users from the unix sockets is Corral's own directories.
        os.chmod(root, 0o755)
        node.call(_node_network, peer.name)
        peer.call(_peer_network)
        cl = new_root(root)
        hvparams = f"kvm:{cluster_hvparams()},security_model=pool"
        pool = f"{POOL[0]}-{POOL[1]}"
        init = ("--enabled-hypervisors=kvm", "-H", hvparams, "--uid-pool", pool)
        result = node.call(cl.init, *init)  # its daemons start in the namespace
        try:
            assert result.rc == 0, result.stderr
            make_os(cl.paths, "tiny")
            yield Bed(cl, node, peer)
        finally:
            kill_leftovers(cl.paths.run_dir)
            cl.stop()
            node.call(delete_table, nft.table_name(cl.paths))


def runtime(cl: TestCluster, name: str) -> Runtime:
    found = Layout(cl.paths.run_dir).read_runtime(name)
    assert found is not None, f"{name} has no runtime file"
    return found


def verify(bed: Bed) -> tuple[int, list[str]]:
    result = bed.cl.gnt("cluster", "verify", "--error-codes")
    return result.rc, [line for line in result.stdout.splitlines() if "ENODENET" in line]


def restart_noded(bed: Bed) -> None:
    cl = bed.cl
    pid = running_pid(cl.paths.pid_file("corral-noded"))
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: running_pid(cl.paths.pid_file("corral-noded")) is None, 15, "noded gone")
    argv = [sys.executable, "-m", "corral.daemons.noded", "--bind", cl.node_ip,
            "--port", str(cl.port)]  # fmt: skip
    bed.node.call(start_daemon, argv, cl.env, timeout=30)


def test_guests_users_are_kept_off_the_node_and_their_traffic_flows(bed: Bed) -> None:
    cl = bed.cl
    for name in ("nr1", "nr2"):
        ok(add(cl, name, "-t", "diskless", "-o", "tiny+default", "-B", "memory=128",
               "--net", f"0:link={BRIDGE}"))  # fmt: skip
    first, second = runtime(cl, "nr1"), runtime(cl, "nr2")
    assert first.uid is not None and second.uid is not None
    assert (first.rules_uid, second.rules_uid) == (first.uid, second.uid)
    assert {first.uid, second.uid} <= set(range(POOL[0], POOL[1] + 1))
    layout = Layout(cl.paths.run_dir)
    unix = [
        ("unix", str(cl.paths.master_socket), 0),
        ("unix", str(layout.qmp("nr2")), 0),
        ("unix", str(layout.serial("nr2")), 0),
    ]
    with listeners_in(bed.node, [("0.0.0.0", 22), ("0.0.0.0", 0)]) as (_, port):
        tcp = [
            ("tcp", cl.node_ip, cl.port),  # noded
            ("tcp", cl.node_ip, RAPI_PORT),
            ("tcp", cl.node_ip, 22),  # SSH
            ("tcp", "127.0.0.1", port),
            ("tcp", METADATA, port),  # not through the guest's own tap
            ("tcp", HOST_ON_BRIDGE, port),
        ]
        # As root (noded) all of them answer; as the guest's uid none.
        assert bed.node.call(probe, tcp) == [CONNECTED] * len(tcp)
        assert bed.node.call(probe, tcp, first.uid) == [REFUSED_BY_RULES] * len(tcp)
        # The unix sockets: file permissions.  The root itself is open to all
        # (the refusal comes from Corral's directories below it).
        assert bed.node.call(probe, unix) == [CONNECTED] * len(unix)
        assert bed.node.call(probe, unix, first.uid) == [13] * len(unix)  # EACCES
        assert os.stat(cl.paths.root).st_mode & 0o005 == 0o005

    # The guest's own traffic through its tap flows.
    console = SerialConsole(layout.serial("nr1"))
    try:
        console.wait_for("CORRAL-GUEST-SHELL")
        console.sock.sendall(
            f"ip link set eth0 up && ip addr add {GUEST}/24 dev eth0"
            f" && ping -c 1 -W 20 {PEER}\n".encode()
        )
        console.wait_for("1 packets received")
    finally:
        console.close()

    # Rules deleted by hand: verify says so; a restarted noded brings them back.
    assert verify(bed) == (0, [])
    bed.node.call(delete_table, bed.table)
    rc, lines = verify(bed)
    assert rc != 0 and len(lines) == 1, lines
    assert f"nft table inet {bed.table} of the network rules" in lines[0]
    assert "restart corral-noded to restore them" in lines[0]
    restart_noded(bed)
    assert verify(bed) == (0, [])
    assert bed.node.call(probe, tcp[:1], first.uid) == [REFUSED_BY_RULES]

    # Each uid leaves the rules with its guest; the table goes with the last.
    ok(cl.gnt("instance", "shutdown", "--timeout=0", "nr2"))
    listing = bed.node.call(table_listing, bed.table)
    assert str(first.uid) in listing and str(second.uid) not in listing
    ok(cl.gnt("instance", "shutdown", "--timeout=0", "nr1"))
    assert bed.node.call(table_listing, bed.table) == ""
    assert verify(bed) == (0, [])


def test_rules_can_be_turned_off_per_instance(bed: Bed) -> None:
    cl = bed.cl
    ok(add(cl, "nr3", "-t", "diskless", "-o", "tiny+default", "-B", "memory=128",
           "--no-nics", "-H", "kvm:use_network_rules=false"))  # fmt: skip
    found = runtime(cl, "nr3")
    assert found.uid is not None and found.rules_uid is None
    assert bed.node.call(table_listing, bed.table) == ""
    assert bed.node.call(probe, [("tcp", cl.node_ip, cl.port)], found.uid) == [CONNECTED]
    assert verify(bed) == (0, [])
    ok(cl.gnt("instance", "remove", "--shutdown-timeout=0", "-f", "nr3"))
