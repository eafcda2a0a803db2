"""corral-metad fed by a real cluster: noded publishes a kvm guest's metadata
when it starts (starting metad on demand) and withdraws it when it stops; the
guest reads its own OS parameters over its communication NIC, and nothing of
another guest's; DHCP on the tap gives the guest its address; a metad killed
is started again and given every guest's data anew.  The whole
cluster runs in a network namespace of the test's own (its taps carry
169.254.169.254); guests are the busybox test guests under TCG, booted once, running as uids
of the cluster's pool under the network rules for QEMU's users."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.metad import client
from corral.metad.wire import NOT_FOUND
from corral.node.hypervisor.kvm.runtime import Layout
from corral.node.netdev import dhcp
from corral.process.daemons import running_pid
from tests.helpers.cluster import TestCluster, new_root
from tests.helpers.instances import add, ok, rows
from tests.helpers.kvm_guest import cluster_hvparams, kill_leftovers, short_root
from tests.helpers.metad import PRIVATE_VALUE, SECRET_VALUE
from tests.helpers.netns_thread import NamespaceThread
from tests.helpers.osdef import make_os
from tests.helpers.serial_console import SerialConsole
from tests.helpers.waiting import wait_until

PARAMS = "ganeti/latest/os/parameters.json"
PUBLIC_VALUE = "bookworm"


@pytest.fixture
def ns_cluster() -> Iterator[TestCluster]:
    """A kvm cluster whose daemons (and so guests' taps and metad) live in a
    namespace of the test's own, with the cluster's communication network."""
    with NamespaceThread() as ns, short_root("mdh") as root:
        ns.call(subprocess.run, ["ip", "link", "set", "lo", "up"], check=True)
        cl = new_root(root)
        # Guests under the network rules (pool uids): their traffic through
        # their own taps reaches 169.254.169.254 all the same.
        hvparams = f"kvm:{cluster_hvparams()},security_model=pool"
        init = ("--enabled-hypervisors=kvm", "-H", hvparams, "--uid-pool", "47360-47369")
        result = ns.call(cl.init, *init)  # its daemons start in the namespace
        try:
            assert result.rc == 0, result.stderr
            make_os(cl.paths, "tiny", parameters={"release": "r", "token": "t", "password": "p"})
            ok(cl.gnt("cluster", "modify", "--instance-communication-network=commnet"))
            yield cl
        finally:
            kill_leftovers(cl.paths.run_dir)
            cl.stop()


def add_guest(cl: TestCluster, name: str) -> None:
    ok(
        add(cl, name, "-t", "diskless", "-o", "tiny+default", "--no-nics", "-c", "yes",
            "-B", "memory=128", "-O", f"release={PUBLIC_VALUE}",
            "--os-parameters-private", f"token={PRIVATE_VALUE}",
            "--os-parameters-secret", f"password={SECRET_VALUE}")
    )  # fmt: skip


def fetch(console: SerialConsole, address: str, tag: str) -> str:
    """The body of the metadata address's answer to the guest's request, given
    ``address`` on its only NIC ("": no answer).  busybox's nc: its wget
    crashes in the test guest looking up the port."""
    request = f"GET /{PARAMS} HTTP/1.0\\r\\n\\r\\n"
    console.sock.sendall(
        (
            "ip addr flush dev eth0; ip link set eth0 up"
            f" && ip addr add {address}/32 dev eth0"
            " && ip route add 169.254.169.254/32 dev eth0"
            f"; echo {tag}-BEGIN; printf '{request}' | nc -w 10 169.254.169.254 80"
            f"; echo; echo {tag}-END\n"
        ).encode()
    )
    # The markers on lines of their own: not the echo of the command line.
    found = console.wait_for(re.compile(rf"\n{tag}-BEGIN\r?\n(.*?)\n{tag}-END\r?\n", re.S))
    answer = found.group(1).replace("\r", "")
    return answer.partition("\n\n")[2].strip()


def published(cl: TestCluster, name: str) -> bool:
    """Whether the node's metad holds ``name``'s data (its control API)."""
    try:
        asyncio.run(client.progress(cl.paths, name))
    except client.MetadError as err:
        if "is not published" not in str(err):
            raise  # metad cannot be reached
        return False
    return True


def serving(cl: TestCluster, *names: str) -> bool:
    """Whether a metad answers and holds every one of ``names``' data."""
    try:
        return all(published(cl, name) for name in names)
    except client.MetadError:  # not listening yet
        return False


def dhcp_server(cl: TestCluster, name: str) -> int:
    """The pid of the dnsmasq on ``name``'s communication tap."""
    [tap] = Layout(cl.paths.run_dir).read_runtime(name).taps  # type: ignore[union-attr]
    return int(dhcp.pid_file(cl.paths.run_dir, tap).read_text())


def gone(pid: int) -> bool:
    """Whether ``pid`` no longer runs (a zombie left for init to reap is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return True
    return stat[stat.rindex(b")") + 2 :][:1] in (b"Z", b"X")


def files_holding(root: Path, value: bytes) -> list[str]:
    found = []
    for directory, _dirs, files in os.walk(root):
        for name in files:
            path = Path(directory, name)
            try:
                if not path.is_socket() and value in path.read_bytes():
                    found.append(str(path))
            except OSError:
                continue
    return found


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_guest_reads_its_own_parameters_from_metad(ns_cluster: TestCluster) -> None:
    cl = ns_cluster
    pid_file = cl.paths.pid_file("corral-metad")
    assert running_pid(pid_file) is None  # on demand only
    add_guest(cl, "inst1")
    add_guest(cl, "inst2")
    metad_pid = running_pid(pid_file)
    assert metad_pid is not None
    layout = Layout(cl.paths.run_dir)
    for name in ("inst1", "inst2"):
        assert layout.read_runtime(name).rules_uid is not None  # type: ignore[union-attr]
    # The private values reached metad's memory, not the guests' runtime files.
    assert files_holding(cl.paths.run_dir, PRIVATE_VALUE.encode()) == []
    ips = {name: rows(cl, ["nic.ips"], name)[0][0] for name in ("inst1", "inst2")}
    consoles = {name: SerialConsole(layout.serial(name)) for name in ("inst1", "inst2")}
    try:
        for console in consoles.values():
            console.wait_for("CORRAL-GUEST-SHELL")
        answer = json.loads(fetch(consoles["inst1"], ips["inst1"], "OWN"))
        # Its public and private parameters; the secret one lived in the add's job only.
        assert answer == {"release": [PUBLIC_VALUE, "public"], "token": [PRIVATE_VALUE, "private"]}
        # inst2 asks DHCP (the node's dnsmasq on its tap) for its address ...
        consoles["inst2"].sock.sendall(
            b"ip link set eth0 up && udhcpc -i eth0 -n -q -t 10 -s /bin/true\n"
        )
        consoles["inst2"].wait_for(f"lease of {re.escape(ips['inst2'])} obtained")
        # ... is published and reaches its own data ...
        assert json.loads(fetch(consoles["inst2"], ips["inst2"], "TWO"))["token"]
        # ... but inst1 claiming inst2's address on its own tap gets nothing: metad's
        # 404 (or no answer at all, where the node's reverse-path filter drops it).
        assert fetch(consoles["inst1"], ips["inst2"], "FORGED") in ("", NOT_FOUND)
        # metad killed: noded starts a new one and publishes both guests again.
        os.kill(metad_pid, signal.SIGKILL)
        wait_until(lambda: running_pid(pid_file) not in (None, metad_pid), 60, "a new metad")
        wait_until(lambda: serving(cl, "inst1", "inst2"), 60, "both guests published again")
        assert (
            json.loads(fetch(consoles["inst1"], ips["inst1"], "AGAIN"))["token"][0] == PRIVATE_VALUE
        )
        metad_pid = running_pid(pid_file)
    finally:
        for console in consoles.values():
            console.close()

    dhcp_pid = dhcp_server(cl, "inst1")
    ok(cl.gnt("instance", "shutdown", "--timeout=0", "inst1"))
    assert not published(cl, "inst1") and published(cl, "inst2")
    assert gone(dhcp_pid)  # its DHCP went with its tap
    assert running_pid(pid_file) == metad_pid  # one metad for the node's guests
    for name in ("inst1", "inst2"):
        ok(cl.gnt("instance", "remove", "-f", name))
    assert not published(cl, "inst2")
    assert files_holding(cl.paths.root, SECRET_VALUE.encode()) == []
    ok(cl.gnt("cluster", "destroy", "--yes-do-it"))  # the node's daemons stop
    assert running_pid(pid_file) is None
