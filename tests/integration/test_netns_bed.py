"""The network-namespace bed: nodes reach each other over the bridge, the
addresses exist nowhere else, and everything is removed afterwards."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from pyroute2 import NetlinkError  # type: ignore[import-untyped]

from tests.helpers.netns import NetnsBed

SERVER = """
import socket, sys
s = socket.socket()
s.bind((sys.argv[1], 8099))
s.listen()
print("ready", flush=True)
conn, peer = s.accept()
conn.sendall(peer[0].encode())
"""
CLIENT = """
import socket, sys
with socket.create_connection((sys.argv[1], 8099), timeout=5) as s:
    print(s.recv(64).decode())
"""


def _netns_names() -> set[str]:
    try:
        return set(os.listdir("/var/run/netns"))
    except FileNotFoundError:
        return set()


def test_nodes_talk_over_the_bridge_and_only_there() -> None:
    with NetnsBed(3) as bed:
        names = {bed.hub, *(bed.namespace(n) for n in (1, 2, 3))}
        assert names <= _netns_names()
        server = subprocess.Popen(
            bed.wrap(3, [sys.executable, "-c", SERVER, bed.address(3)]),
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None and server.stdout.readline() == "ready\n"
            client = subprocess.run(
                bed.wrap(1, [sys.executable, "-c", CLIENT, bed.address(3)]),
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            )
            # The server saw node 1's own address: the packet crossed the bridge.
            assert client.stdout.strip() == bed.address(1)
        finally:
            server.kill()
            server.wait()
        # From the test's own namespace the address does not exist.
        with socket.socket() as sock, pytest.raises(OSError):
            sock.bind((bed.address(1), 0))
    assert not names & _netns_names()


def test_a_failed_set_up_leaves_nothing() -> None:
    with pytest.raises(ValueError):
        NetnsBed(0)
    bed = NetnsBed(2)
    bed.tag = "x" * 20  # interface names longer than the kernel allows: creation fails
    before = _netns_names()
    with pytest.raises(NetlinkError), bed:
        pass
    assert _netns_names() == before
