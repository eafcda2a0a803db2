"""The etcd bed of tests/helpers/etcd_cluster.py with every node in a network
namespace of its own (tests/helpers/netns.py, corral/testbed.py), and the
faults that need one: the master's link down, one-way partitions.

Five nodes, three of them master candidates (``--candidate-pool-size 3``)
each running an etcd member, the stores moved into etcd, masterd leading on
one candidate and standing by on the others.  Every daemon runs inside its
node's namespace; luxi is a unix socket in each node's root, so the
clients on the host call any candidate's masterd
(tests/helpers/fault_clients.py).  Everything made is gone on every way
out: the daemons stopped, the nft tables and the namespaces removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import aiohttp

from corral import testbed
from corral.node.etcd_member import etcd_root
from corral.paths import Paths
from corral.process.daemons import start_daemon, stop_daemon
from corral.state.etcd.client import EtcdClient, client_ssl_context
from corral.state.etcd.members import Candidate
from tests.helpers import fence_windows
from tests.helpers.crash import MASTERD
from tests.helpers.etcd_cluster import SETTLE, etcd_pid, settle
from tests.helpers.fault_clients import (
    OPTIONS,
    TAKEOVER,
    Clients,
    call,
    frozen_master,
    kill_master_node,
    leader,
    wait_progress,
)
from tests.helpers.netns import SUBNET, NetnsBed
from tests.helpers.noded import NODED
from tests.helpers.waiting import wait_until

T = TypeVar("T")
NODES = 5
CANDIDATES = 3
# The nft table the partitions add in the master's namespace.
TABLE = "corralfault"
# What etcd 3.4 logs for every call through its gateway with a client certificate.
GATEWAY_NOISE = "ignoring common name in gRPC-gateway proxy request"
_CLONE_NEWNET = 0x40000000


def in_namespace(name: str, work: Callable[[], T]) -> T:
    """``work()`` run in a thread that joined network namespace ``name``: its
    sockets are that namespace's, the rest of the process stays where it is."""
    results: list[T] = []
    failures: list[BaseException] = []

    def run() -> None:
        try:
            fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
            try:
                if ctypes.CDLL(None, use_errno=True).setns(fd, _CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"Cannot join network namespace {name}")
                results.append(work())
            finally:
                os.close(fd)
        except BaseException as err:  # raised again in the caller's thread
            failures.append(err)

    thread = threading.Thread(target=run, name=f"in-{name}")
    thread.start()
    thread.join()
    if failures:
        raise failures[0]
    return results[0]


@dataclass
class NetBed:
    """A running bed: ``nodes`` are the master candidates."""

    bed: testbed.Testbed
    network: NetnsBed
    nodes: list[Candidate] = field(default_factory=list)

    def paths(self, name: str) -> Paths:
        return self.bed.node(name).paths

    def namespace(self, name: str) -> str:
        return self.network.namespace(self.bed.node(name).index)

    def inside(self, name: str, *argv: str, stdin: str | None = None) -> None:
        """Run ``argv`` in node ``name``'s namespace (RuntimeError if it fails)."""
        command = self.network.wrap(self.bed.node(name).index, list(argv))
        done = subprocess.run(
            command, input=stdin, capture_output=True, text=True, timeout=30, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} on {name}: {done.stderr.strip()}")

    def etcd(self) -> EtcdClient:
        """A client of every candidate's member (make it inside a namespace's thread)."""
        paths = self.bed.master.paths
        tls = client_ssl_context(paths.ca_cert, paths.client_pem)
        return EtcdClient([n.client_url for n in self.nodes], tls, deadline=2.0)

    def start_masterd(self, name: str) -> None:
        """masterd with the fault tests' lease on node ``name``, once it answers."""
        node = self.bed.node(name)
        argv = [sys.executable, "-m", "corral.daemons.masterd", *OPTIONS]
        start_daemon(self.network.wrap(node.index, argv), testbed.daemon_env(node.paths), 30)

    def restart_node(self, name: str) -> None:
        """noded (and with it the etcd member), then masterd standing by."""
        node = self.bed.node(name)
        wrap = self.network.wrap
        testbed.start_joining(
            node.paths, node.address, self.bed.port, None, lambda argv: wrap(node.index, argv)
        )
        wait_until(lambda: etcd_pid(node.paths) is not None, 30, f"etcd of {name}")
        self.start_masterd(name)

    def serving(self, where: str) -> list[bool]:
        """Whether each candidate's etcd member serves, as seen from node ``where``."""

        async def ask() -> list[bool]:
            etcd = self.etcd()
            try:
                return [await etcd.healthy(n.client_url) for n in self.nodes]
            finally:
                await etcd.close()

        return in_namespace(self.namespace(where), lambda: asyncio.run(ask()))

    def healthy(self, where: str) -> bool:
        """Whether every candidate's etcd member serves, as seen from node ``where``."""
        return all(self.serving(where))

    def health_answers(self, where: str) -> list[str]:
        """Each candidate's member's answer to ``/health`` from node ``where``
        (its body, or the error getting it)."""

        async def ask(session: aiohttp.ClientSession, url: str) -> str:
            try:
                async with session.get(url + "/health") as response:
                    return f"{response.status} {(await response.text()).strip()}"
            except (aiohttp.ClientError, TimeoutError) as err:
                return f"{type(err).__name__}: {err}"

        async def ask_all() -> list[str]:
            paths = self.bed.master.paths
            connector = aiohttp.TCPConnector(
                ssl=client_ssl_context(paths.ca_cert, paths.client_pem)
            )
            timeout = aiohttp.ClientTimeout(total=3.0)
            async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
                return [await ask(session, n.client_url) for n in self.nodes]

        return in_namespace(self.namespace(where), lambda: asyncio.run(ask_all()))

    def members_report(self, where: str) -> str:
        """Each candidate's member as seen from node ``where``: its answer to
        ``/health``, its pid, the end of its log less the warning etcd 3.4
        logs for every call through its gateway (for a test that failed
        waiting)."""
        lines = []
        for node, answer in zip(self.nodes, self.health_answers(where), strict=True):
            paths = self.paths(node.name)
            log_file = etcd_root(paths) / "etcd.log"
            text = log_file.read_text(errors="replace") if log_file.exists() else ""
            kept = [line for line in text.splitlines() if GATEWAY_NOISE not in line]
            lines.append(f"{node.name}: /health {answer!r} pid={etcd_pid(paths)}")
            lines.extend(f"  {line}" for line in kept[-25:])
        return "\n".join(lines)

    def logs(self, daemon: str) -> dict[str, Path]:
        """``daemon``'s log on every node (that has one)."""
        found = {n.name: n.paths.daemon_log(daemon) for n in self.bed.nodes}
        return {name: path for name, path in found.items() if path.exists()}

    def stop(self) -> None:
        """Stop every daemon of every node (noded logs its last fence windows)."""
        self.bed.down()


def _candidates(bed: testbed.Testbed) -> list[Candidate]:
    out = bed.gnt(
        "node", "list", "--no-headers", "--separator=|", "-o", "name,pip,master_candidate"
    )
    assert out.returncode == 0, out.stderr
    rows = [line.split("|") for line in out.stdout.splitlines()]
    return [Candidate(name, "", ip) for name, ip, candidate in rows if candidate == "Y"]


def _make(net: NetBed) -> None:
    bed = net.bed
    pool = bed.gnt("cluster", "modify", "--candidate-pool-size", str(CANDIDATES))
    assert pool.returncode == 0, pool.stderr
    # The candidates first, then the others: joined at once, each would see
    # the pool short of candidates.
    bed.add_nodes(CANDIDATES - 1)
    bed.add_nodes(NODES - CANDIDATES)
    net.nodes = _candidates(bed)
    assert len(net.nodes) == CANDIDATES, net.nodes
    stop_daemon(bed.master.paths, MASTERD)
    net.start_masterd(bed.master.name)
    modify = bed.gnt("cluster", "modify", "--etcd-members=yes")
    assert modify.returncode == 0, modify.stderr
    in_namespace(net.namespace(bed.master.name), lambda: asyncio.run(settle(net, (CANDIDATES, 0))))
    for node in net.nodes:
        where = net.paths(node.name).store_home
        wait_until(where.exists, SETTLE, f"{node.name} told where the stores live")
    for node in net.nodes[1:]:
        net.start_masterd(node.name)


@contextlib.contextmanager
def netns_etcd_bed(root: Path) -> Iterator[NetBed]:
    """The bed (see the module) for the ``with`` block; all of it gone after."""
    with NetnsBed(NODES) as network:
        bed = testbed.up(root, nodes=1, network=network)
        net = NetBed(bed, network)
        try:
            _make(net)
            yield net
        finally:
            net.stop()


def back_in_service(net: NetBed, name: str) -> None:
    """Until node ``name``'s masterd stands by and every member serves again."""
    wait_until(lambda: _stands_by(net, name), TAKEOVER, f"{name}'s masterd standing by")
    try:
        wait_until(lambda: net.healthy(name), TAKEOVER, "every etcd member serving")
    except AssertionError as err:
        raise AssertionError(f"{err}\n{net.members_report(name)}") from None


def _stands_by(net: NetBed, name: str) -> bool:
    try:
        call(net, name, "QueryConfigValues", ["master_node"])
    except Exception as err:
        return "is not the master" in str(err)
    return False


# The faults: each a context manager giving the master it hit and the seconds
# until another node led; the fault lasts the block, undone after.
@contextlib.contextmanager
def killed_master(net: NetBed) -> Iterator[tuple[str, float]]:
    """kill -9 of the master's masterd, noded and etcd member; started again after."""
    victim, taken = kill_master_node(net)
    try:
        yield victim, taken
    finally:
        net.restart_node(victim)


@contextlib.contextmanager
def isolated_master(net: NetBed) -> Iterator[tuple[str, float]]:
    """The master's veth down (``ip link set``) until another node leads, then
    for the block; up again after."""
    victim = leader(net)
    link = net.network.interface(net.bed.node(victim).index)
    start = time.monotonic()
    net.inside(victim, "ip", "link", "set", link, "down")
    try:
        wait_until(lambda: leader(net) != victim, TAKEOVER, "a master other than the isolated")
        yield victim, time.monotonic() - start
    finally:
        net.inside(victim, "ip", "link", "set", link, "up")


def _rules(own: str, direction: str) -> str:
    """An nft table dropping the packets to (output) or from (input) the
    other nodes only."""
    match = "daddr" if direction == "output" else "saddr"
    return (
        f"table ip {TABLE} {{\n chain {direction} {{\n"
        f"  type filter hook {direction} priority 0; policy accept;\n"
        f"  ip {match} {SUBNET}.0/24 ip {match} != {own} drop\n }}\n}}\n"
    )


@contextlib.contextmanager
def partitioned_master(net: NetBed, direction: str) -> Iterator[tuple[str, float]]:
    """One-way partition of the master (nftables in its namespace): its
    packets to the other nodes (``output``) or theirs to it (``input``)
    dropped until another node leads, then for the block; healed after."""
    if direction not in ("output", "input"):
        raise ValueError(f"A partition drops output or input, not {direction!r}")
    victim = leader(net)
    own = net.bed.node(victim).address
    start = time.monotonic()
    net.inside(victim, "nft", "-f", "-", stdin=_rules(own, direction))
    try:
        wait_until(lambda: leader(net) != victim, TAKEOVER, "a master other than the partitioned")
        yield victim, time.monotonic() - start
    finally:
        net.inside(victim, "nft", "delete", "table", "ip", TABLE)


Fault = Callable[[NetBed], contextlib.AbstractContextManager[tuple[str, float]]]
FAULTS: dict[str, Fault] = {
    "kill": killed_master,
    "freeze": frozen_master,
    "link-down": isolated_master,
    "drop-out": functools.partial(partitioned_master, direction="output"),
    "drop-in": functools.partial(partitioned_master, direction="input"),
}


def fault(net: NetBed, clients: Clients, kind: str, calls: int) -> tuple[str, float]:
    """One fault of ``kind`` (see FAULTS) while the clients make ``calls``
    calls, undone; once the master it hit stands by and every member serves."""
    with FAULTS[kind](net) as (victim, taken):
        wait_progress(clients, calls)
    try:
        back_in_service(net, victim)
    except AssertionError as err:
        raise AssertionError(f"after the {kind} fault of {victim}: {err}") from None
    return victim, taken


@dataclass
class Fencing:
    """What the logs say of the masters' fences once every daemon stopped."""

    windows: fence_windows.Verdict
    writes_refused: int  # by etcd
    calls_not_sent: int  # by a master whose lease may have run out

    def __str__(self) -> str:
        return (
            f"{self.windows}; deposed masters: {self.writes_refused} writes refused,"
            f" {self.calls_not_sent} node calls not sent"
        )


def fencing(net: NetBed) -> Fencing:
    """Stop every daemon (noded logs its last windows), then read the nodes'
    fence windows and refusals and the masterds' refused writes."""
    net.stop()
    windows = fence_windows.check(fence_windows.read(net.logs(NODED)))
    refusals = [fence_windows.masterd_refusals(path) for path in net.logs(MASTERD).values()]
    writes = sum(counts["writes"] for counts in refusals)
    return Fencing(windows, writes, sum(counts["calls"] for counts in refusals))
