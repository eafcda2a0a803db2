"""DHCP on an instance communication tap, as Ganeti's ``ifup-os`` gives it
with dnsmasq, but one dnsmasq per tap: bound to that tap alone (its DHCP
socket too, ``SO_BINDTODEVICE``), answering only the guest's MAC with the
guest's address on the communication network, no DNS, no lease file.  It is
started with the tap and killed, by the pid in its pid file, with the tap;
like the guest's QEMU it outlives a noded restart.

Blocking (a subprocess, a short wait): call through ``asyncio.to_thread``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import subprocess
import time
from pathlib import Path

from corral import constants as C
from corral import errors

DEFAULT_DNSMASQ = "/usr/sbin/dnsmasq"  # Debian's dnsmasq-base
DNSMASQ_ENV = "CORRAL_DNSMASQ_PATH"
# How long a dnsmasq gets to exit after SIGTERM before SIGKILL.
_STOP_GRACE = 5.0
_POLL = 0.02


def dnsmasq_binary() -> str:
    """The dnsmasq this node runs (the environment may name another)."""
    return os.environ.get(DNSMASQ_ENV) or DEFAULT_DNSMASQ


def pid_file(run_dir: Path, tap: str) -> Path:
    """Where the dnsmasq of ``tap`` records its pid."""
    return run_dir / "dhcp" / f"{tap}.pid"


def dnsmasq_argv(binary: str, tap: str, mac: str, ip: str, pidfile: Path) -> list[str]:
    """dnsmasq serving ``ip`` to ``mac`` on ``tap`` and nothing else."""
    network = ipaddress.ip_network(C.INSTANCE_COMMUNICATION_NETWORK4)
    return [
        binary,
        "--conf-file=/dev/null",
        "--port=0",  # no DNS
        f"--interface={tap}",
        "--bind-interfaces",
        "--except-interface=lo",
        f"--dhcp-range={network.network_address},static,{network.netmask}",
        f"--dhcp-host={mac},{ip}",
        "--dhcp-authoritative",
        "--leasefile-ro",
        "--no-hosts",
        "--no-resolv",
        "--no-ping",
        f"--pid-file={pidfile}",
    ]


def start(run_dir: Path, tap: str, mac: str, ip: str) -> None:
    """Start the dnsmasq of ``tap`` (it is ready once this returns);
    OpExecError saying why if it cannot start."""
    binary = dnsmasq_binary()
    if not os.access(binary, os.X_OK):
        raise errors.OpExecError(f"No DHCP on {tap}: {binary} is missing (install dnsmasq-base)")
    pidfile = pid_file(run_dir, tap)
    pidfile.parent.mkdir(parents=True, exist_ok=True)
    stop(run_dir, tap)  # one left by a guest whose cleanup never ran
    # dnsmasq forks; its first process exits once the daemon is set up.
    proc = subprocess.run(
        dnsmasq_argv(binary, tap, mac, ip, pidfile),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise errors.OpExecError(f"No DHCP on {tap}: {why}")


def stop(run_dir: Path, tap: str) -> None:
    """Kill the dnsmasq of ``tap``, if one runs, and wait for it to go."""
    pidfile = pid_file(run_dir, tap)
    pid = _our_pid(pidfile)
    if pid is not None:
        _kill(pid)
    pidfile.unlink(missing_ok=True)


def _our_pid(pidfile: Path) -> int | None:
    """The pid in ``pidfile`` if that process is the dnsmasq writing it (a
    reused pid is someone else's)."""
    try:
        pid = int(pidfile.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if f"--pid-file={pidfile}".encode() in cmdline.split(b"\0") else None


def _kill(pid: int) -> None:
    """SIGTERM, then SIGKILL if it is still there after the grace."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + _STOP_GRACE
        while _exists(pid) and time.monotonic() < deadline:
            time.sleep(_POLL)
        if not _exists(pid):
            return


def _exists(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    # A zombie (dnsmasq's parent, noded, is gone: init reaps it) counts as gone.
    return stat[stat.rindex(b")") + 2 :][:1] not in (b"Z", b"X")
