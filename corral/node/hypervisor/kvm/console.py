"""How to reach a kvm instance's console, as Ganeti's GetInstanceConsole says."""

from __future__ import annotations

from pathlib import Path

from corral.node.hypervisor.kvm.cmdline import VNC_BASE_PORT
from corral.node.hypervisor.spec import ConsoleInfo, InstanceSpec

SOCAT = "socat"
# Ganeti's socat options: a raw terminal, Ctrl-] (0x1d) ends the session.
SOCAT_STDIO = "STDIO,raw,echo=0,escape=0x1d"
SSH_CONSOLE_USER = "root"


def console_info(spec: InstanceSpec, node_name: str, serial: Path) -> ConsoleInfo:
    """The serial console (over ssh to the node), else VNC, else a message."""
    hvp = spec.hvparams
    if hvp.get("serial_console"):
        return ConsoleInfo(
            spec.name,
            "ssh",
            host=node_name,
            user=SSH_CONSOLE_USER,
            command=(SOCAT, SOCAT_STDIO, f"UNIX-CONNECT:{serial}"),
        )
    address = str(hvp.get("vnc_bind_address") or "")
    port = spec.wire.get("network_port")
    if address and isinstance(port, int) and port > VNC_BASE_PORT:
        return ConsoleInfo(spec.name, "vnc", host=address, port=port, display=port - VNC_BASE_PORT)
    return ConsoleInfo(spec.name, "msg", message=f"No serial shell for instance {spec.name}")
