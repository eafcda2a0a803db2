"""Where noded listens for the VNC of a QEMU in namespaces
(corral.node.hypervisor.kvm.vnc_listener), and what it binds."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from corral import errors
from corral.node.hypervisor.kvm import vnc_listener
from tests.helpers.noded import free_port

ON = {"use_namespaces": True, "vnc_bind_address": "127.0.0.1"}


@pytest.mark.parametrize(
    ("hvp", "port", "found"),
    [
        (ON, 11005, ("127.0.0.1", 11005)),
        ({**ON, "vnc_bind_address": "::1"}, 5901, ("::1", 5901)),
        ({**ON, "use_namespaces": False}, 11005, None),  # QEMU listens itself
        ({**ON, "vnc_bind_address": ""}, 11005, None),  # no VNC
        (ON, 5900, None),  # not a VNC display: no VNC, as Ganeti
        (ON, None, None),
    ],
)
def test_endpoint(hvp: dict[str, Any], port: int | None, found: Any) -> None:
    assert vnc_listener.endpoint(hvp, port) == found


@pytest.mark.parametrize("address", ["127.0.0.1", "::1"])
def test_bind_listens_where_qemu_would(address: str) -> None:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    port = free_port(address) if family == socket.AF_INET else 0
    with vnc_listener.bind(address, port) as listening:
        port = listening.getsockname()[1]
        with socket.create_connection((address, port), timeout=5):
            conn, _ = listening.accept()
            conn.close()


def test_bind_says_what_is_wrong() -> None:
    with vnc_listener.bind("127.0.0.1", 0) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(errors.OpExecError, match=f"127.0.0.1 port {port}: Address already"):
            vnc_listener.bind("127.0.0.1", port)
    with pytest.raises(errors.OpExecError, match="Invalid vnc_bind_address 'eth0'"):
        vnc_listener.bind("eth0", 11005)
