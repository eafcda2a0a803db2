"""kvm's ``use_namespaces``: QEMU in PID, mount, IPC, UTS and network
namespaces of its own, with a real TCG guest booted once (the hypervisor
runs in a network namespace of the test's, where the guest's bridge and its
peer are)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
import signal
import socket
import subprocess
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from pyroute2 import IPRoute  # type: ignore[import-untyped]

from corral import errors
from corral.crypto import certs
from corral.node.hypervisor.kvm import KvmHypervisor, vnc_listener
from corral.node.hypervisor.spec import InstanceSpec, NicSpec
from corral.paths import Paths
from tests.helpers.cluster import unique_loopback
from tests.helpers.kvm_guest import (
    MARKER,
    Serial,
    guest_spec,
    hypervisor_pair,
    serial,
    short_root,
    unique_uid_pool,
)
from tests.helpers.netns_thread import NamespaceThread
from tests.helpers.noded import free_port
from tests.helpers.rfb import NONE, VENCRYPT, vnc_session
from tests.helpers.waiting import wait_until, wait_until_async

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root")
T = TypeVar("T")
SUBNET = f"10.213.{secrets.randbelow(150) + 100}"
PEER, GUEST = f"{SUBNET}.1", f"{SUBNET}.2"
VNC_ADDRESS = "127.0.0.1"  # the bed's own loopback
NAMESPACE_KINDS = ("pid", "mnt", "ipc", "uts", "net")
POOL = unique_uid_pool(2)


@dataclasses.dataclass
class Bed:
    hv: KvmHypervisor
    root: Path
    console: Serial
    run: Callable[[Coroutine[Any, Any, Any]], Any]
    call: Callable[..., Any]  # a function run in the bed's network namespace

    @property
    def pid(self) -> int:
        return self.hv.monitors["ns1"].pid

    def shell(self, command: str, expect: str) -> None:
        """Type ``command`` on the guest's console; wait for ``expect``."""
        start = len(self.console.lines)
        self.run(self.console.send(command + "\n"))
        self.run(self.console.wait_for(expect, start=start))


def _bridge(name: str, address: str) -> None:
    with IPRoute() as ipr:
        ipr.link("add", ifname=name, kind="bridge")
        index = ipr.link_lookup(ifname=name)[0]
        ipr.addr("add", index=index, address=address, prefixlen=24)
        ipr.link("set", index=index, state="up")


@pytest.fixture(scope="module")
def bed() -> Iterator[Bed]:
    bridge = f"crl{secrets.token_hex(3)}br"
    with short_root("kvns") as root, NamespaceThread() as ns:
        loop = asyncio.new_event_loop()

        def run(coro: Coroutine[Any, Any, T]) -> T:
            return ns.call(loop.run_until_complete, coro)

        ns.call(_bridge, bridge, PEER)
        ns.call(subprocess.run, ["ip", "link", "set", "lo", "up"], check=True)
        hv = KvmHypervisor(Paths(root))
        run(hv.resume())
        spec = dataclasses.replace(
            guest_spec("ns1", use_namespaces=True, security_model="pool", use_chroot=True),
            nics=(NicSpec(0, "nic-uuid", "aa:00:00:5e:13:01", "bridged", bridge),),
        )
        try:
            run(_pool(root))
            run(hv.start(spec, paused=True))
            reader, writer = run(asyncio.open_unix_connection(str(hv.layout.serial("ns1"))))
            console = run(_serial(reader, writer))
            run(hv.monitors["ns1"].execute("cont"))
            run(console.wait_for(MARKER))
            yield Bed(hv, root, console, run, ns.call)
            run(console.close())
        finally:
            for name in list(hv.monitors):
                run(hv.stop(name, force=True))
            run(hv.close())
            loop.close()


async def _serial(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Serial:
    return Serial(reader, writer)  # its reading task needs the running loop


async def _pool(root: Path) -> None:
    ssconf = Paths(root).ssconf_file("uid_pool")
    ssconf.parent.mkdir(parents=True, exist_ok=True)
    ssconf.write_text(f"{POOL[0]}-{POOL[1]}\n")


def namespaces(pid: int) -> dict[str, str]:
    return {kind: os.readlink(f"/proc/{pid}/ns/{kind}") for kind in NAMESPACE_KINDS}


def holders(inode: str) -> list[int]:
    """The processes in the mount namespace ``inode`` (``mnt:[...]``)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/mnt") == inode:
                    found.append(int(entry))
            except OSError:
                continue
    return found


@pytest.mark.slow
def test_the_guest_boots_in_namespaces_of_its_own(bed: Bed) -> None:
    ours = namespaces(os.getpid())
    theirs = namespaces(bed.pid)
    assert all(ours[kind] != theirs[kind] for kind in NAMESPACE_KINDS), (ours, theirs)
    # The serial console works both ways.
    bed.shell("echo CORRAL-NS-$((6*7))", "CORRAL-NS-42")


def inside(pid: int, kinds: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """``argv`` run in ``pid``'s namespaces ``kinds`` (nsenter's -m, -p, -n)."""
    return subprocess.run(
        ["nsenter", "-t", str(pid), *(f"-{k}" for k in kinds), *argv],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.slow
def test_only_qemu_in_its_pid_namespace(bed: Bed) -> None:
    # nsenter forks into the namespace: ps sees QEMU (PID 1), and itself.
    ps = inside(bed.pid, "mp", "ps", "-e", "-o", "pid=,user=,args=")
    assert ps.returncode == 0, ps.stderr
    rows = [line.split(None, 2) for line in ps.stdout.splitlines()]
    others = [row for row in rows if not row[2].startswith("ps ")]
    assert [(row[0], row[1]) for row in others] == [("1", str(POOL[0]))], ps.stdout
    assert others[0][2].startswith(str(bed.hv.layout.read_runtime("ns1").argv[0]))  # type: ignore[union-attr]


@pytest.mark.slow
def test_qemu_sees_none_of_the_nodes_files(bed: Bed) -> None:
    marker = bed.root / "corral-ns-marker"
    marker.write_text("x")
    hidden = [str(marker), "/root", "/etc/passwd", "/home", "/var", str(bed.hv.layout.qmp("ns1"))]
    shown = [
        "/usr/bin",
        str(bed.hv.layout.chroot("ns1")),
        str(bed.hv.layout.read_runtime("ns1").spec["hvparams"]["kernel_path"]),  # type: ignore[union-attr]
    ]
    for path in hidden:
        assert inside(bed.pid, "m", "test", "-e", path).returncode == 1, path
    for path in shown:
        assert inside(bed.pid, "m", "test", "-e", path).returncode == 0, path
    touch = inside(bed.pid, "m", "touch", "/corral-ns-write-test")
    assert "Read-only file system" in touch.stderr
    # Through /proc, QEMU's root is its chroot: empty.
    assert os.listdir(f"/proc/{bed.pid}/root") == []


# Connects to each target given (tcp:HOST:PORT or unix:PATH, a leading @ for
# an abstract name); prints "ok" or the error's name for each.
PROBE = """
import socket, sys
for target in sys.argv[1:]:
    kind, _, address = target.partition(":")
    if kind == "tcp":
        host, _, port = address.rpartition(":")
        sock, where = socket.socket(), (host, int(port))
    else:
        sock, where = socket.socket(socket.AF_UNIX), address.replace("@", "\\0", 1)
    sock.settimeout(10)
    try:
        sock.connect(where)
        print("ok")
    except OSError as err:
        print(type(err).__name__)
"""


def _listeners(root: Path) -> tuple[list[socket.socket], list[str]]:
    """Listening sockets where a node's services are (its address on the
    guest's network, its loopback, a unix socket as masterd's, an abstract
    one), made in the bed's network namespace: the probe's targets."""
    opened: list[socket.socket] = []
    targets = []
    for host in (PEER, "127.0.0.1"):
        sock = socket.create_server((host, 0))
        opened.append(sock)
        targets.append(f"tcp:{host}:{sock.getsockname()[1]}")
    for name in (str(root / "probe-master.sock"), f"@corral-probe-{secrets.token_hex(4)}"):
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(name.replace("@", "\0", 1))
        sock.listen()
        opened.append(sock)
        targets.append(f"unix:{name}")
    return opened, targets


@pytest.mark.slow
def test_from_qemus_context_nothing_of_the_node_is_reachable(bed: Bed) -> None:
    """A helper run as QEMU's uid in QEMU's mount and network namespaces
    reaches none of the node's services that the same probe reaches from
    the node; the guest's own traffic flows (the next test)."""
    opened, targets = bed.call(_listeners, bed.root)
    qmp = str(bed.hv.layout.qmp("ns1"))  # the guests' sockets too
    try:
        outside = bed.call(subprocess.run, ["/usr/bin/python3", "-c", PROBE, *targets],
                           capture_output=True, text=True, check=False)  # fmt: skip
        assert outside.stdout.split() == ["ok"] * 4, outside.stderr
        uid = str(os.stat(f"/proc/{bed.pid}").st_uid)
        probe = inside(bed.pid, "mn", "-S", uid, "-G", uid, "/usr/bin/python3", "-c", PROBE,
                       *targets, f"unix:{qmp}")  # fmt: skip
        assert uid != "0"
        assert probe.stdout.split() == [
            "OSError",  # no route: its only interface, lo, is down
            "OSError",
            "FileNotFoundError",  # the node's files are not in its mount namespace
            "ConnectionRefusedError",  # abstract names are per network namespace
            "FileNotFoundError",
        ], probe.stderr
    finally:
        for sock in opened:
            sock.close()


@pytest.mark.slow
def test_only_lo_down_and_the_guest_reaches_its_peer(bed: Bed) -> None:
    links = inside(bed.pid, "n", "ip", "-o", "link")
    assert links.returncode == 0, links.stderr
    assert [line.split(":")[1].strip() for line in links.stdout.splitlines()] == ["lo"]
    assert "state DOWN" in links.stdout
    assert inside(bed.pid, "n", "ip", "-o", "addr").stdout == ""
    bed.shell(
        f"ip link set eth0 up && ip addr add {GUEST}/24 dev eth0 && ping -c 1 -W 20 {PEER}",
        "1 packets received",
    )


@pytest.mark.slow
def test_kill_9_leaves_nothing(bed: Bed) -> None:
    """A second guest, paused: SIGKILL, and no process, mount or file is left."""
    spec = guest_spec("ns2", use_namespaces=True)
    bed.run(bed.hv.start(spec, paused=True))
    pid = bed.hv.monitors["ns2"].pid
    mnt = namespaces(pid)["mnt"]
    assert holders(mnt) == [pid]
    os.kill(pid, signal.SIGKILL)
    bed.run(wait_until_async(lambda: bed.hv.layout.names() == ["ns1"], timeout=30))
    wait_until(lambda: holders(mnt) == [])
    assert "ns2" not in bed.hv.monitors
    assert not bed.hv.layout.nsroot("ns2").exists()
    assert not bed.hv.layout.log("ns2").exists() and not bed.hv.layout.qmp("ns2").exists()
    assert "nsroot" not in Path("/proc/self/mountinfo").read_text()


def test_qemu_failing_in_its_namespace_reports_why(bed: Bed) -> None:
    spec = guest_spec("ns3", use_namespaces=True, kvm_extra="-no-such-option")
    with pytest.raises(errors.OpExecError, match="no-such-option"):
        bed.run(bed.hv.start(spec))
    assert bed.hv.layout.names() == ["ns1"] and not bed.hv.layout.nsroot("ns3").exists()


@pytest.mark.slow
async def test_migration_between_two_nodes() -> None:
    """Both QEMUs without a network: the target's noded accepts the stream
    and the source's connects it, QEMU runs TLS over the handed-in sockets."""
    address = unique_loopback()
    spec = guest_spec("nsmig", "corral.counter=1", use_namespaces=True)
    async with hypervisor_pair(address) as (src, dst):
        await src.start(spec, paused=True)
        async with serial(src.layout.serial(spec.name)) as before:
            await src.monitors[spec.name].execute("cont")
            await before.wait_for("CORRAL-GUEST-COUNT 3")
            info = await src.migration_info(spec)
            accepted = await dst.accept_instance(spec, info, address)
            live = "not_live" not in info  # as the master decides (TCG: paused)
            await src.migrate_instance("cluster.example.com", spec, address, live, accepted)
            async with asyncio.timeout(120):
                while (status := await src.migration_status(spec))["status"] == "active":
                    await asyncio.sleep(0.05)
            assert status["status"] == "completed", status
            counted = max(
                int(line.split()[-1]) for line in before.lines if "CORRAL-GUEST-COUNT" in line
            )
        await dst.finalize_migration_dst(spec, info, True)
        await src.finalize_migration_src(spec, True, True)
        assert src.layout.names() == [] and dst.layout.names() == [spec.name]
        pid = dst.monitors[spec.name].pid
        assert namespaces(pid)["net"] != namespaces(os.getpid())["net"]
        async with serial(dst.layout.serial(spec.name)) as after:
            await after.wait_for(f"CORRAL-GUEST-COUNT {counted + 2}")
            assert after.count(MARKER) == 0


def vnc_spec(name: str, port: int, **hvp: Any) -> InstanceSpec:
    """A guest in namespaces with VNC on the bed's loopback at ``port``."""
    base = guest_spec(name, use_namespaces=True, vnc_bind_address=VNC_ADDRESS, **hvp)
    return dataclasses.replace(base, wire={**base.wire, "network_port": port})


async def refused(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection(VNC_ADDRESS, port)
    except ConnectionRefusedError:
        return True
    writer.close()
    return False


async def _vnc_life(root: Path, spec: InstanceSpec, port: int) -> None:
    """Two clients of a guest's VNC while QEMU listens nowhere; again after a
    restart of the hypervisor (noded); the port closed once QEMU is killed."""
    hv = KvmHypervisor(Paths(root))
    await hv.resume()
    await hv.start(spec, paused=True)
    pid = hv.monitors[spec.name].pid
    async with vnc_session(VNC_ADDRESS, port) as first, vnc_session(VNC_ADDRESS, port) as second:
        for session in (first, second):
            assert (session.types, session.result) == ([NONE], 0)
            assert session.name == f"QEMU ({spec.name})"  # QEMU's own ServerInit
            assert session.size is not None and session.size[0] > 0
    listening = await asyncio.to_thread(inside, pid, "n", "ss", "-Hltn")
    assert listening.returncode == 0 and listening.stdout == "", listening
    await hv.close()  # noded stops: its listener with it, the guest runs on
    assert await refused(port)
    hv = KvmHypervisor(Paths(root))
    await hv.resume()
    try:
        async with vnc_session(VNC_ADDRESS, port) as again:
            assert (again.result, again.name) == (0, f"QEMU ({spec.name})")
        os.kill(pid, signal.SIGKILL)
        await wait_until_async(lambda: hv.layout.names() == [], timeout=30)
        assert await refused(port)
    finally:
        for name in list(hv.monitors):
            await hv.stop(name, force=True)
        await hv.close()


@pytest.mark.slow
def test_vnc_through_the_nodes_listener(bed: Bed) -> None:
    port = bed.call(free_port, VNC_ADDRESS)
    with short_root("kvnc") as root:
        bed.run(_vnc_life(root, vnc_spec("nsvnc", port), port))


def _every_address() -> None:
    with vnc_listener.bind("0.0.0.0", 0) as listening:
        port = listening.getsockname()[1]
        for address in ("127.0.0.1", "::1"):
            with socket.create_connection((address, port), timeout=5) as client:
                conn, peer = listening.accept()  # connected: in the queue already
                conn.close()
                assert peer[0] == ("::ffff:127.0.0.1" if "." in address else "::1")
                assert client.recv(1) == b""


def test_vnc_on_every_address_as_qemu(bed: Bed) -> None:
    """vnc_bind_address 0.0.0.0: noded's listener takes IPv4 and IPv6
    clients, as QEMU's own (``:display`` listens on both)."""
    bed.call(_every_address)


def _x509(directory: Path) -> Path:
    """QEMU's TLS credentials for the bed's loopback in ``directory``; the CA's file."""
    ca_cert, ca_key = certs.make_ca("vnc-ca.example.com", 30)
    cert, key = certs.make_signed_cert(
        ca_cert, ca_key, "vnc.example.com", 30, server=True, client=False, ips=[VNC_ADDRESS]
    )
    directory.mkdir(mode=0o700)
    for name, pem in (("ca-cert.pem", ca_cert), ("server-cert.pem", cert)):
        certs.write_pem(directory / name, pem, private=False)
    certs.write_pem(directory / "server-key.pem", key)
    return directory / "ca-cert.pem"


@pytest.mark.slow
def test_vnc_with_password_and_tls_in_namespaces(bed: Bed, tmp_path: Path) -> None:
    """QEMU reads its certificates in its mount namespace and runs TLS (VeNCrypt
    X.509) and the password on the connections noded hands it."""
    ca = _x509(tmp_path / "x509")
    (tmp_path / "vnc-pw").write_text("s3cret\n")
    port = bed.call(free_port, VNC_ADDRESS)
    spec = vnc_spec(
        "nstls", port, vnc_password_file=str(tmp_path / "vnc-pw"), vnc_tls=True,
        vnc_x509_path=str(tmp_path / "x509"), security_model="pool", use_chroot=True,
    )  # fmt: skip

    async def logins() -> list[tuple[list[int], int, str | None]]:
        out = []
        for password in ("wrong", "s3cret"):
            async with vnc_session(VNC_ADDRESS, port, password, ca=ca) as session:
                out.append((session.types, session.result, session.name))
        return out

    bed.run(bed.hv.start(spec, paused=True))
    try:
        assert bed.run(logins()) == [([VENCRYPT], 1, None), ([VENCRYPT], 0, "QEMU (nstls)")]
    finally:
        bed.run(bed.hv.stop(spec.name, force=True))
