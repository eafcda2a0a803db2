"""master-ip-setup: Corral's default master IP script, as Ganeti's ``tools/master-ip-setup``.

Run by noded as ``python -m corral.tools.master_ip_setup start|stop`` with
Ganeti's environment: ``MASTER_NETDEV``, ``MASTER_IP``, ``MASTER_NETMASK``
and ``CLUSTER_IP_VERSION``.

``start`` does nothing when the address is already this machine's (the
kernel answers it locally: on a demo cluster the master IP is the node's own
address on ``lo``); refuses when another machine answers it (fping, where
installed); else adds ``MASTER_IP/MASTER_NETMASK`` to ``MASTER_NETDEV`` and
announces it (arping / ndisc6, where installed, failures ignored).

``stop`` removes the address from ``MASTER_NETDEV``; when it is not there it
does nothing, unless the address sits on another device of this machine
(Ganeti's "configured on wrong device" error).

Exit 0 on success; 1 with a message on standard error otherwise.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
import sys

USAGE = "Usage: master-ip-setup {start|stop}"
_PATH = "/sbin:/bin:/usr/sbin:/usr/bin:/usr/local/sbin"
# Ganeti's fping count and interval: about a second until an address is
# taken as silent.
_FPING = ["-c", "5", "-p", "200"]


class Refused(Exception):
    """A reason to exit 1, said on standard error."""


class Setup:
    """The master IP's parameters, read from the environment."""

    def __init__(self, env: dict[str, str]) -> None:
        try:
            self.netdev = env["MASTER_NETDEV"]
            self.ip = env["MASTER_IP"]
            netmask = env["MASTER_NETMASK"]
            version = env["CLUSTER_IP_VERSION"]
        except KeyError as err:
            raise Refused(f"Environment variable {err.args[0]} is not set") from None
        if version not in ("4", "6"):
            raise Refused(f"Invalid cluster IP version specified: {version}")
        self.version = int(version)
        try:
            self.interface = ipaddress.ip_interface(f"{self.ip}/{netmask}")
        except ValueError:
            raise Refused(f"Invalid master IP address or netmask: {self.ip}/{netmask}") from None
        if self.interface.version != self.version:
            raise Refused(f"{self.ip} is not an IPv{version} address")
        self.netmask = netmask

    @property
    def cidr(self) -> str:
        return f"{self.ip}/{self.netmask}"


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, capture_output=True, text=True, check=False, env={**os.environ, "PATH": _PATH}
    )


def _local(ip: str) -> bool:
    """Whether the kernel answers ``ip`` on this machine (Ganeti asks fping
    from 127.0.0.1; the routing table says the same without packets)."""
    out = _run(["ip", "-o", "route", "get", ip]).stdout
    return out.startswith("local ")


def devices_with(ip: str) -> list[str]:
    """The devices that carry ``ip`` as one of their own addresses."""
    found = []
    for line in _run(["ip", "-o", "addr", "show"]).stdout.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[3].split("/")[0] == ip:
            found.append(fields[1].rstrip(":").split("@")[0])
    return found


def _answers_elsewhere(ip: str) -> bool:
    fping = shutil.which("fping", path=_PATH)
    if fping is None:
        print("fping is not installed: not checking whether another machine has the address")
        return False
    return _run([fping, *_FPING, ip]).returncode == 0


def start(setup: Setup) -> str:
    """Bring the master IP up on this node."""
    if _local(setup.ip):
        return "Master IP address already configured on this machine. Doing nothing."
    if _answers_elsewhere(setup.ip):
        raise Refused("Error: master IP address configured on another machine.")
    cmd = ["ip", "addr", "add", setup.cidr, "dev", setup.netdev]
    label = f"{setup.netdev}:0"
    if setup.version == 4 and len(label) <= 15:  # the kernel's limit on a label
        cmd += ["label", label]
    if _run([*cmd, "preferred_lft", "0"]).returncode != 0:
        raise Refused("Error during the activation of the master IP address")
    _announce(setup)
    return ""


def _announce(setup: Setup) -> None:
    """Gratuitous ARP (IPv4) or an unsolicited advertisement (IPv6); best effort."""
    if setup.version == 4:
        tool = shutil.which("arping", path=_PATH)
        cmd = [f"{tool}", "-q", "-U", "-c", "3", "-I", setup.netdev, "-s", setup.ip, setup.ip]
    else:
        tool = shutil.which("ndisc6", path=_PATH)
        cmd = [f"{tool}", "-q", "-r", "3", setup.ip, setup.netdev]
    if tool is not None:
        _run(cmd)


def stop(setup: Setup) -> str:
    """Bring the master IP down on this node."""
    shown = _run(["ip", "-o", "addr", "show", "dev", setup.netdev]).stdout
    if f" {setup.cidr} " not in shown:
        if [dev for dev in devices_with(setup.ip) if dev != setup.netdev]:
            raise Refused(
                "Error: master IP address configured on wrong device, can't shut it down."
            )
        return "Master IP address not configured on this machine. Doing nothing."
    if _run(["ip", "addr", "del", setup.cidr, "dev", setup.netdev]).returncode != 0:
        raise Refused("Error during the deactivation of the master IP address")
    return ""


def main(argv: list[str] | None = None) -> int:
    """Run ``start`` or ``stop``; the exit code."""
    args = sys.argv[1:] if argv is None else argv
    actions = {"start": start, "stop": stop}
    if len(args) < 1 or args[0] not in actions:
        print(USAGE, file=sys.stderr)
        return 1
    try:
        said = actions[args[0]](Setup(dict(os.environ)))
    except Refused as err:
        print(err, file=sys.stderr)
        return 1
    if said:
        print(said)
    return 0


if __name__ == "__main__":
    sys.exit(main())
