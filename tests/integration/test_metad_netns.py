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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from corral.metad import client
from corral.metad.model import METADATA_ADDRESS
from corral.paths import Paths
from tests.helpers.metad import (
    PRIVATE_VALUE,
    SECRET_VALUE,
    USER_DATA,
    ip,
    plug,
    prepare_node,
    running_metad,
    sample,
)
from tests.helpers.netns_thread import NamespaceThread


@dataclass(frozen=True)
class Guest:
    ns: NamespaceThread
    tap: str  # the node's end of its veth
    node: str  # the namespace of the node (and of the tap)
    ip: str
    name: str


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
        prepare_node(node.name, ns_a.name, ns_b.name)
        a = Guest(ns_a, f"cmd{pid}a", node.name, "169.254.1.1", "a.example.com")
        b = Guest(ns_b, f"cmd{pid}b", node.name, "169.254.1.2", "b.example.com")
        for guest in (a, b):
            plug(node.name, guest.ns.name, guest.tap, inside(guest), guest.ip)
        with running_metad(node.name, tmp_path) as paths:
            for guest in (a, b):
                meta = sample(guest.name, installing=True, comm_ip=guest.ip)
                asyncio.run(client.publish(paths, client.record_of(meta, guest.tap, guest.ip)))
            yield paths, a, b
    for path in tmp_path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert SECRET_VALUE.encode() not in data, f"the secret is in {path}"
            assert PRIVATE_VALUE.encode() not in data, f"a private value is in {path}"


def inside(guest: Guest) -> str:
    """The guest's end of its veth."""
    return guest.tap[:-1] + "g" + guest.tap[-1]


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
    # Guest a takes b's address as well and asks with it: it arrives on a's tap.
    ip("-n", a.ns.name, "addr", "add", f"{b.ip}/32", "dev", inside(a))
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


def test_a_tap_made_again_is_listened_on_again(bed: tuple[Paths, Guest, Guest]) -> None:
    paths, a, _b = bed
    # The instance restarts: its tap goes and comes back under the same name.
    ip("-n", a.node, "link", "del", a.tap)
    plug(a.node, a.ns.name, a.tap, inside(a), a.ip)
    meta = sample(a.name, comm_ip=a.ip)
    asyncio.run(client.publish(paths, client.record_of(meta, a.tap, a.ip)))
    status, body = a.ns.call(get, "/ganeti/latest/os/parameters.json", a.ip)
    assert status == 200
    assert "password" not in json.loads(body)  # republished outside an install
