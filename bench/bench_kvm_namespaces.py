"""What QEMU in namespaces of its own costs a guest (issue 24, kvm's
``use_namespaces``): its boot, and its network throughput through its tap,
with the isolation on against off in the same run.

The guest is the test guest of ``tests/helpers/guest.py`` (Debian's cloud
kernel, the busybox initramfs, direct kernel boot, TCG: the ``/dev/kvm`` of
this machine kind hangs stock kernels), 128 MiB, one NIC bridged, run by
noded's own kvm hypervisor (``KvmHypervisor``, the code noded runs) on a short
node root in a network namespace of the benchmark's, where the bridge and the
peer's address are.  Both ways the guest is the same (``security_model=pool``,
``use_chroot``); only ``use_namespaces`` differs (and the name, MAC and
address, as both run at once for the throughput).

A run starts both guests at once (the order of the calls alternates between
runs), as noded starts guests (paused, then QMP ``cont``), then makes each
send the same data; both are stopped after it.  A warm-up run is dropped.

* **Boot** (median of the per-run ratios on / off, target ≤ 1.05): from just
  before the hypervisor's ``start`` (with namespaces this forks the helper
  that unshares and builds QEMU's file system) through attaching to the
  serial console and ``cont`` to the guest's ``CORRAL-GUEST-UP`` line.  Both
  guests boot at the same time: the load of this shared machine (other
  processes come and go) weighs on both alike.
* **Throughput** (median of the per-run ratios on / off, target ≥ 0.95): each
  guest's busybox ``httpd`` serves a 32 MiB file (in its RAM), and the peer,
  on the bridge's address, GETs it ``--mib`` / 32 times from each guest
  (after one untimed GET each), the two guests taking turns file by file:
  ``--mib`` MiB from each guest through its tap and the bridge, timed at the
  peer from each connect to the last byte.  (busybox ``nc`` moves only ~3
  MiB/s here under TCG, bounded by its small buffer, not by the network
  path; ``httpd`` sends with ``sendfile``.)  QEMU's network path is the same
  both ways: the tap's descriptor, passed in (no veth).

The machine (2 shared cores, TCG) is noisy: at a load of 6 to 9 one 32 MiB
transfer of the same guest takes from a fifth to five times the next one's
time, and its boot varies by 50 %; hence many files per run, taking turns.

Ganeti 3.0.2: not measured (Ganeti has no namespaces for QEMU).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import secrets
import socket
import subprocess
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from bench.common import Figure, arg_parser, median, write_results
from corral.node.hypervisor.kvm import KvmHypervisor
from corral.node.hypervisor.spec import InstanceSpec, NicSpec
from corral.paths import Paths
from tests.helpers.kvm_guest import MARKER, guest_spec, short_root
from tests.helpers.netns_thread import NamespaceThread
from tests.helpers.serial_console import SerialConsole
from tests.helpers.waiting import wait_until

NAME = "kvm_namespaces"
SUBNET = "10.213.31"
PEER = f"{SUBNET}.1"  # the guests: .2 with namespaces, .3 without
PORT = 8080
MIB = 1 << 20
FILE_MIB = 32  # in the guest's RAM (its root is the initramfs): 128 MiB in all
DEFAULT_MIB = 512
POOL = "47370-47372"
WAIT = 300.0
T = TypeVar("T")


@dataclasses.dataclass
class Node:
    """The hypervisor, in the benchmark's namespace, and its event loop."""

    ns: NamespaceThread
    hv: KvmHypervisor
    loop: asyncio.AbstractEventLoop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.ns.call(self.loop.run_until_complete, coro)


def guest(bridge: str, namespaces: bool) -> InstanceSpec:
    """The guest with or without its namespaces; all else is the same but
    its name, MAC and address (both ways run at once for the throughput)."""
    suffix = 2 if namespaces else 3
    base = guest_spec(
        f"nsb{suffix}", use_namespaces=namespaces, security_model="pool", use_chroot=True
    )
    nic = NicSpec(0, f"nic{suffix}", f"aa:00:00:5e:31:0{suffix}", "bridged", bridge)
    return dataclasses.replace(base, nics=(nic,))


def address(spec: InstanceSpec) -> str:
    return f"{SUBNET}.{spec.name[-1]}"


def network(bridge: str) -> None:
    """The bridge, holding the peer's address (run in the namespace)."""
    for argv in (
        ["ip", "link", "set", "lo", "up"],
        ["ip", "link", "add", bridge, "type", "bridge"],
        ["ip", "addr", "add", f"{PEER}/24", "dev", bridge],
        ["ip", "link", "set", bridge, "up"],
    ):
        subprocess.run(argv, check=True, capture_output=True)


async def boot(hv: KvmHypervisor, spec: InstanceSpec) -> tuple[float, SerialConsole]:
    """Seconds from the start to the guest's marker; its console, attached."""
    start = time.perf_counter()
    await hv.start(spec, paused=True)
    console = SerialConsole(hv.layout.serial(spec.name))
    await hv.monitors[spec.name].execute("cont")
    await asyncio.to_thread(console.wait_for, MARKER, WAIT)
    seconds = time.perf_counter() - start
    runtime = hv.layout.read_runtime(spec.name)
    if runtime is None or runtime.namespaces != spec.hvparams["use_namespaces"]:
        raise RuntimeError(f"{spec.name} does not run the way it was asked")
    return seconds, console


async def boot_together(
    hv: KvmHypervisor, specs: list[InstanceSpec]
) -> list[tuple[float, SerialConsole]]:
    """Both guests started at once (in the order of ``specs``)."""
    return list(await asyncio.gather(*(boot(hv, spec) for spec in specs)))


def serve(ns: NamespaceThread, console: SerialConsole, ip: str) -> None:
    """The guest's address on its NIC and a web server with a file of
    FILE_MIB MiB in its RAM; back once the peer reaches it."""
    console.wait_for("CORRAL-GUEST-SHELL", WAIT)
    # (What is awaited is never in the echo of what was typed.)
    console.sock.sendall(
        f"ip link set eth0 up && ip addr add {ip}/24 dev eth0"
        f" && mkdir -p /www && dd if=/dev/zero of=/www/f bs=1M count={FILE_MIB} 2>/dev/null"
        f" && httpd -p {PORT} -h /www && echo serving-$((1+1))\n".encode()
    )
    console.wait_for("serving-2", WAIT)
    wait_until(lambda: ns.call(reachable, ip), WAIT, f"the web server on {ip}")


def reachable(ip: str) -> bool:
    try:
        socket.create_connection((ip, PORT), timeout=5).close()
    except OSError:
        return False
    return True


def fetch(ip: str) -> float:
    """Seconds the peer takes to GET the guest's file (run in the namespace)."""
    buffer = bytearray(MIB)
    start = time.perf_counter()
    with socket.create_connection((ip, PORT), timeout=WAIT) as conn:
        conn.sendall(b"GET /f HTTP/1.0\r\n\r\n")
        got = 0
        while count := conn.recv_into(buffer):
            got += count
    if got < FILE_MIB * MIB:
        raise RuntimeError(f"{ip} sent {got} bytes, not its {FILE_MIB} MiB file")
    return time.perf_counter() - start


def one_run(node: Node, bridge: str, run: int, mib: int) -> dict[str, tuple[float, float]]:
    """Each way's boot seconds and MiB/s; ``on`` first in even runs."""
    ways = ("on", "off") if run % 2 == 0 else ("off", "on")
    specs = [guest(bridge, way == "on") for way in ways]
    booted: list[tuple[float, SerialConsole]] = []
    try:
        booted = node.run(boot_together(node.hv, specs))
        for spec, (_, console) in zip(specs, booted, strict=True):
            serve(node.ns, console, address(spec))
        for spec in specs:
            node.ns.call(fetch, address(spec))  # ARP, slow start: not timed
        # The transfers take turns, file by file.
        seconds = dict.fromkeys(ways, 0.0)
        for _ in range(max(1, mib // FILE_MIB)):
            for way, spec in zip(ways, specs, strict=True):
                seconds[way] += node.ns.call(fetch, address(spec))
        sent = max(1, mib // FILE_MIB) * FILE_MIB
        return {
            way: (boot_seconds, sent / seconds[way])
            for way, (boot_seconds, _) in zip(ways, booted, strict=True)
        }
    finally:
        for _, console in booted:
            console.close()
        for spec in specs:
            node.run(node.hv.stop(spec.name, force=True))


def measure(args: argparse.Namespace) -> tuple[list[Figure], dict[str, Any]]:
    boot_figure = Figure(
        "kvm_namespaces_boot_ratio",
        "guest boot with use_namespaces / without",
        "x",
        1.05,
        "max",
        "not measured",
    )
    net_figure = Figure(
        "kvm_namespaces_tap_throughput_ratio",
        f"guest → peer through its tap ({args.mib} MiB) with use_namespaces / without",
        "x",
        0.95,
        "min",
        "not measured",
    )
    bridge = f"crl{secrets.token_hex(3)}br"
    with short_root("kvnb") as root, NamespaceThread() as ns:
        ns.call(network, bridge)
        ssconf = Paths(root).ssconf_file("uid_pool")
        ssconf.parent.mkdir(parents=True, exist_ok=True)
        ssconf.write_text(f"{POOL}\n")
        loop = asyncio.new_event_loop()
        node = Node(ns, KvmHypervisor(Paths(root)), loop)
        try:
            node.run(node.hv.resume())
            one_run(node, bridge, 1, args.mib)  # warm-up, dropped
            rounds = []
            for run in range(args.runs):
                rounds.append(one_run(node, bridge, run, args.mib))
                print(f"run {run + 1}: {rounds[-1]}", flush=True)
        finally:
            for name in list(node.hv.monitors):
                node.run(node.hv.stop(name, force=True))
            node.run(node.hv.close())
            loop.close()
    booted = [{way: r[way][0] for way in r} for r in rounds]
    sent = [{way: r[way][1] for way in r} for r in rounds]
    boot_figure.runs = [r["on"] / r["off"] for r in booted]
    net_figure.runs = [r["on"] / r["off"] for r in sent]
    return [boot_figure, net_figure], {"boot_s": _columns(booted), "mib_s": _columns(sent)}


def _columns(rounds: list[dict[str, float]]) -> dict[str, Any]:
    """Each way's values per run and their median."""
    out: dict[str, Any] = {}
    for way in ("on", "off"):
        values = [r[way] for r in rounds]
        out[way] = [round(v, 3) for v in values]
        out[f"{way}_median"] = round(median(values), 3)
    return out


def main() -> None:
    parser = arg_parser(__doc__ or NAME)
    parser.add_argument("--mib", type=int, default=DEFAULT_MIB, help="MiB the guest sends")
    args = parser.parse_args()
    figures, extra = measure(args)
    write_results(NAME, figures, {"runs": args.runs, "mib": args.mib}, extra)


if __name__ == "__main__":
    main()
