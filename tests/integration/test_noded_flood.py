"""noded under a flood of connections that never authenticate (issue 8, item 3).

A real cluster whose noded runs with a limit of 256 open files (the issue saw
1,024; 256 makes the flood bite on any machine) is sent 1,100 TCP connections:
1,000 that send nothing and 100 that send the start of a TLS ClientHello.
masterd's calls to the node still work while they are open and once they
timed out, the node's open files stay bounded, and its log stays small.
Without the bounds, noded ran out of descriptors, stopped accepting, and
wrote megabytes of "socket.accept() out of system resource" tracebacks.
"""

from __future__ import annotations

import asyncio
import os
import resource
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from corral.crypto.tls import ssl_client_context
from corral.process.daemons import running_pid, start_daemon, stop_daemon
from corral.rpc.client import RpcClient
from tests.helpers.cluster import TestCluster, running_cluster, unique_loopback
from tests.helpers.instances import add, ok
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.slow

NODED = "corral-noded"
FD_LIMIT = 256
IDLE, HELLOS = 1000, 100
# A TLS record header announcing a 512-byte ClientHello, and only its start.
PARTIAL_HELLO = bytes.fromhex("16030102000100 01fc0303".replace(" ", "")) + os.urandom(32)
# Runs noded (the rest of the command line) with a small limit of open files.
_WITH_FD_LIMIT = (
    "import os, resource, sys;"
    f"resource.setrlimit(resource.RLIMIT_NOFILE, ({FD_LIMIT}, {FD_LIMIT}));"
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    # The flood needs more descriptors in this process than the usual 1,024.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = IDLE + HELLOS + 512
    if soft < wanted <= hard or hard == resource.RLIM_INFINITY:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    try:
        with running_cluster(tmp_path_factory.mktemp("flood")) as cluster:
            yield cluster
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def restart_noded(cl: TestCluster, *options: str) -> int:
    """Restart the cluster's noded with ``options`` and FD_LIMIT open files; its pid."""
    stop_daemon(cl.paths, NODED)
    noded = ["-m", "corral.daemons.noded", "-b", cl.node_ip, "-p", str(cl.port), *options]
    start_daemon([sys.executable, "-c", _WITH_FD_LIMIT, *noded], cl.env, timeout=30)
    pid = running_pid(cl.paths.pid_file(NODED))
    assert pid is not None
    return pid


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the other end closed ``sock`` (without reading from it)."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:  # reset
        return True


@contextmanager
def flood(address: str, port: int) -> Iterator[list[socket.socket]]:
    """IDLE silent connections, then HELLOS with a partial ClientHello (yielded)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(IDLE + HELLOS):
            socks.append(socket.create_connection((address, port), timeout=30))
        hellos = socks[IDLE:]
        for sock in hellos:
            sock.sendall(PARTIAL_HELLO)
        yield hellos
    finally:
        for sock in socks:
            sock.close()


def log_size(cl: TestCluster) -> int:
    return cl.paths.daemon_log(NODED).stat().st_size


def log_since(cl: TestCluster, offset: int) -> str:
    with cl.paths.daemon_log(NODED).open("rb") as handle:
        handle.seek(offset)
        return handle.read().decode("utf-8", "replace")


def test_masterd_reaches_the_node_while_the_flood_is_open(cl: TestCluster) -> None:
    # Handshakes get far longer than the test: only the bounds can save the node.
    pid = restart_noded(cl, "--handshake-timeout", "600")
    base_fds, base_log = open_fds(pid), log_size(cl)
    with flood(cl.node_ip, cl.port):
        # An instance add calls the node (hypervisor_info, instance_start).
        ok(add(cl, "during-flood", "-t", "diskless", "--no-install"))
        # 128 waiting for their handshake at most (the default), and a few more.
        assert open_fds(pid) <= base_fds + 128 + 16
        ok(cl.gnt("instance", "remove", "-f", "during-flood"))
    assert running_pid(cl.paths.pid_file(NODED)) == pid
    grown = log_since(cl, base_log)
    assert "Closed an unauthenticated connection" in grown
    assert "Traceback" not in grown
    assert log_size(cl) - base_log < MIB


def test_the_flood_times_out_and_the_node_stays_reachable(cl: TestCluster) -> None:
    pid = restart_noded(cl, "--handshake-timeout", "2")
    base_fds, base_log = open_fds(pid), log_size(cl)
    with flood(cl.node_ip, cl.port) as hellos:
        wait_until(lambda: all(closed_by_peer(s) for s in hellos), 30, "hellos closed")
        wait_until(lambda: open_fds(pid) <= base_fds + 2, 30, "noded's connections closed")
        ok(add(cl, "after-flood", "-t", "diskless", "--no-install"))
        ok(cl.gnt("instance", "remove", "-f", "after-flood"))
    grown = log_since(cl, base_log)
    assert "TLS handshake with" in grown  # the time-outs, at most 10 a minute
    assert "Traceback" not in grown
    assert log_size(cl) - base_log < MIB


def test_an_idle_authenticated_connection_is_closed(cl: TestCluster) -> None:
    restart_noded(cl, "--idle-timeout", "2")
    raw = socket.create_connection((cl.node_ip, cl.port), timeout=30)
    # The handshake is done; the server closes the connection once it idled.
    with (
        ssl_client_context(cl.paths).wrap_socket(raw) as tls,
        suppress(ssl.SSLEOFError, ConnectionResetError),
    ):
        assert tls.recv(1) == b""


async def test_a_silent_node_costs_the_caller_only_its_time_out(cl: TestCluster) -> None:
    """masterd's side: a node that accepts but never finishes the handshake."""
    restart_noded(cl)
    silent = unique_loopback()
    # Connections to it wait in its backlog: accepted by the kernel, never answered.
    with socket.create_server((silent, cl.port)):
        async with RpcClient(cl.paths, cl.port) as rpc:
            call = rpc.call([("node1", cl.node_ip), ("silent", silent)], "version", [], timeout=2)
            results = await asyncio.wait_for(call, 60)
    assert not results["node1"].failed
    assert results["silent"].failed
    assert "timed out after 2 s" in str(results["silent"].fail_msg)


# A GuardedTCPSite in a process of its own with 64 descriptors but bounds far
# above: accepting runs out of descriptors, as when other files took noded's
# reserve.  It answers GET / with "ok" and prints "ready" once it listens.
_OUT_OF_FDS_SERVER = """
import asyncio, resource, sys
from pathlib import Path
from aiohttp import web
from corral.crypto.tls import ssl_server_context
from corral.process.daemons import setup_logging
from corral.http.limits import ConnectionLimits
from corral.http.listener import GuardedTCPSite
from corral.paths import Paths

root, address, port, log = sys.argv[1:]
setup_logging(Path(log), debug=False)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
limits = ConnectionLimits(handshake_timeout=600, max_unauthenticated=9999, max_connections=9999)

async def main():
    app = web.Application()
    app.router.add_get("/", lambda request: web.Response(text="ok"))
    runner = web.AppRunner(app)
    await runner.setup()
    tls = ssl_server_context(Paths(Path(root)))
    await GuardedTCPSite(runner, address, int(port), ssl_context=tls, limits=limits).start()
    print("ready", flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def test_out_of_descriptors_drops_the_oldest_and_does_not_spin(
    cl: TestCluster, tmp_path: Path
) -> None:
    address, port, log = unique_loopback(), cl.port, tmp_path / "server.log"
    args = [str(cl.paths.root), address, str(port), str(log)]
    with subprocess.Popen(
        [sys.executable, "-c", _OUT_OF_FDS_SERVER, *args],
        env=cl.env,
        stdout=subprocess.PIPE,
        text=True,
    ) as server:
        try:
            assert server.stdout is not None and server.stdout.readline() == "ready\n"
            socks = [socket.create_connection((address, port), timeout=30) for _ in range(200)]
            try:
                wait_until(lambda: "Too many open files" in log.read_text(), 30, "EMFILE")
                raw = socket.create_connection((address, port), timeout=30)
                with ssl_client_context(cl.paths).wrap_socket(raw) as tls:
                    tls.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    reply = b"".join(iter(lambda: tls.recv(4096), b""))
            finally:
                for sock in socks:
                    sock.close()
            assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"ok")
            lines = log.read_text().splitlines()
            # Rate-limited: at most 10 of each kind (and no tracebacks).
            assert sum("Cannot accept a connection" in line for line in lines) <= 10
            assert len(lines) < 100
        finally:
            server.kill()
