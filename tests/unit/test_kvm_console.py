"""The console description of kvm instances (Ganeti's GetInstanceConsole)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from corral.hvparams import DEFAULTS
from corral.node.hypervisor.kvm.console import console_info
from corral.node.hypervisor.spec import InstanceSpec

SERIAL = Path("/run/kvm-hypervisor/ctrl/inst1.serial")


def spec(network_port: int | None = 11000, **hvp: Any) -> InstanceSpec:
    hvparams = {**DEFAULTS["kvm"], **hvp}
    return InstanceSpec(
        "inst1", "u1", "kvm", "tiny", 128, 1, hvparams, {},
        wire={"name": "inst1", "network_port": network_port},
    )  # fmt: skip


def test_serial_console_over_ssh() -> None:
    info = console_info(spec(), "node1.example.com", SERIAL).to_wire()
    assert info == {
        "instance": "inst1",
        "kind": "ssh",
        "host": "node1.example.com",
        "user": "root",
        "command": ["socat", "STDIO,raw,echo=0,escape=0x1d", f"UNIX-CONNECT:{SERIAL}"],
    }


def test_vnc_without_serial_console() -> None:
    info = console_info(spec(serial_console=False, vnc_bind_address="127.0.0.1"), "n", SERIAL)
    assert info.to_wire() == {
        "instance": "inst1", "kind": "vnc", "host": "127.0.0.1", "port": 11000, "display": 5100,
    }  # fmt: skip


def test_message_without_either() -> None:
    for hvp in ({}, {"vnc_bind_address": "127.0.0.1"}):
        info = console_info(spec(None, serial_console=False, **hvp), "n", SERIAL)
        assert info.kind == "msg" and info.message == "No serial shell for instance inst1"
