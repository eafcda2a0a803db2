"""A real corral-metad in a node namespace of the test's own, two guests in
namespaces of theirs, each behind a routed veth (the node's end carries
169.254.169.254/32, a /32 route leads to the guest), as the communication
NIC's tap does.  Each guest sees only its own data; a guest forging the
other's address gets nothing; huge and malformed requests are refused; no
secret is left anywhere under the test's root afterwards."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from corral.metad import client
from corral.metad.model import METADATA_ADDRESS
from corral.paths import Paths
from corral.process.daemons import start_daemon, stop_daemon
from tests.helpers.metad import PRIVATE_VALUE, SECRET_VALUE, USER_DATA, sample
from tests.helpers.netns_thread import NamespaceThread

BIN = Path(__file__).resolve().parents[2] / ".venv" / "bin"


@dataclass(frozen=True)
class Guest:
    ns: NamespaceThread
    tap: str  # the node's end of its veth
    ip: str
    name: str


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def plug(node: NamespaceThread, guest: NamespaceThread, tap: str, address: str) -> None:
    """A routed veth between ``node`` (169.254.169.254 on ``tap``) and ``guest``."""
    inside = tap[:-1] + "g" + tap[-1]
    ip(
        "-n",
        node.name,
        "link",
        "add",
        tap,
        "type",
        "veth",
        "peer",
        "name",
        inside,
        "netns",
        guest.name,
    )
    ip("-n", node.name, "addr", "add", f"{METADATA_ADDRESS}/32", "dev", tap)
    ip("-n", node.name, "link", "set", tap, "up")
    ip("-n", node.name, "route", "add", f"{address}/32", "dev", tap)
    ip("-n", guest.name, "addr", "add", f"{address}/32", "dev", inside)
    ip("-n", guest.name, "link", "set", inside, "up")
    ip("-n", guest.name, "route", "add", f"{METADATA_ADDRESS}/32", "dev", inside)


def get(
    path: str, source: str, method: str = "GET", body: bytes | None = None
) -> tuple[int, bytes]:
    """A request to 169.254.169.254 from ``source`` (run in a guest's namespace)."""
    conn = http.client.HTTPConnection(METADATA_ADDRESS, 80, timeout=10, source_address=(source, 0))
    try:
        conn.request(method, path, body=body)
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def raw(data: bytes, source: str) -> bytes:
    """``data`` sent as it is; all that comes back."""
    with socket.create_connection(
        (METADATA_ADDRESS, 80), timeout=10, source_address=(source, 0)
    ) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


@pytest.fixture
def bed(tmp_path: Path) -> Iterator[tuple[Paths, Guest, Guest]]:
    pid = os.getpid()
    with NamespaceThread() as node, NamespaceThread() as ns_a, NamespaceThread() as ns_b:
        for ns in (node, ns_a, ns_b):
            ip("-n", ns.name, "link", "set", "lo", "up")
        # The forged packets must reach metad: its check, not the kernel's, is under test.
        for key in ("all", "default"):
            ip("netns", "exec", node.name, "sysctl", "-qw", f"net.ipv4.conf.{key}.rp_filter=0")
        a = Guest(ns_a, f"cmd{pid}a", "169.254.1.1", "a.example.com")
        b = Guest(ns_b, f"cmd{pid}b", "169.254.1.2", "b.example.com")
        for guest in (a, b):
            plug(node, guest.ns, guest.tap, guest.ip)
            ip(
                "netns",
                "exec",
                node.name,
                "sysctl",
                "-qw",
                f"net.ipv4.conf.{guest.tap}.rp_filter=0",
            )
        paths = Paths(tmp_path)
        env = {"CORRAL_ROOT": str(tmp_path)}
        start_daemon(["ip", "netns", "exec", node.name, str(BIN / "corral-metad")], env)
        try:
            for guest in (a, b):
                meta = sample(guest.name, installing=True, comm_ip=guest.ip)
                asyncio.run(client.publish(paths, client.record_of(meta, guest.tap, guest.ip)))
            yield paths, a, b
        finally:
            stop_daemon(paths, "corral-metad")
    for path in tmp_path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert SECRET_VALUE.encode() not in data, f"the secret is in {path}"
            assert PRIVATE_VALUE.encode() not in data, f"a private value is in {path}"


def test_each_guest_sees_only_its_own_data(bed: tuple[Paths, Guest, Guest]) -> None:
    _paths, a, b = bed
    for guest in (a, b):
        status, body = guest.ns.call(get, "/ganeti/latest/meta_data.json", guest.ip)
        assert status == 200
        assert json.loads(body)["name"] == guest.name
        status, body = guest.ns.call(get, "/ganeti/latest/os/parameters.json", guest.ip)
        assert json.loads(body)["password"] == [SECRET_VALUE, "secret"]
        assert guest.ns.call(get, "/nocloud/user-data", guest.ip) == (200, USER_DATA)
        status, body = guest.ns.call(get, "/latest/meta-data/local-hostname", guest.ip)
        assert (status, body) == (200, guest.name.split(".")[0].encode())


def test_a_forged_source_address_gets_nothing(bed: tuple[Paths, Guest, Guest]) -> None:
    _paths, a, b = bed
    inside = a.tap[:-1] + "g" + a.tap[-1]
    # Guest a takes b's address as well and asks with it: it arrives on a's tap.
    ip("-n", a.ns.name, "addr", "add", f"{b.ip}/32", "dev", inside)
    for path in ("/ganeti/latest/os/parameters.json", "/nocloud/meta-data", "/openstack"):
        status, body = a.ns.call(get, path, b.ip)
        assert (status, body) == (404, b"Resource not found")


def test_install_progress_reaches_noded(bed: tuple[Paths, Guest, Guest]) -> None:
    paths, a, b = bed
    assert a.ns.call(get, "/ganeti/latest/write", a.ip, "POST", b"formatting\ncopying\n")[0] == 200
    assert asyncio.run(client.progress(paths, a.name)) == ["formatting", "copying"]
    assert asyncio.run(client.progress(paths, b.name)) == []


def test_huge_or_malformed_requests_are_refused(bed: tuple[Paths, Guest, Guest]) -> None:
    _paths, a, _b = bed
    for data in (
        b"GET /" + b"a" * 10000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET / HTTP/1.1\r\n" + b"X-A: b\r\n" * 200 + b"\r\n",
        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n",
    ):
        answer = a.ns.call(raw, data, a.ip)
        assert answer.split(b" ", 2)[1] == b"400", answer[:60]
        assert SECRET_VALUE.encode() not in answer
    status, _ = a.ns.call(get, "/ganeti/latest/write", a.ip, "POST", b"x" * (1 << 20))
    assert status == 413


def test_withdrawn_instances_are_gone(bed: tuple[Paths, Guest, Guest]) -> None:
    paths, a, b = bed
    asyncio.run(client.withdraw(paths, a.name))
    with pytest.raises(OSError):  # its tap is not listened on any more
        a.ns.call(get, "/nocloud/meta-data", a.ip)
    assert b.ns.call(get, "/nocloud/user-data", b.ip) == (200, USER_DATA)
