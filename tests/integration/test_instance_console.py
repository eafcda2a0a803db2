"""gnt-instance console, OP_INSTANCE_CONSOLE and the RAPI console through a
real cluster: the fake hypervisor's test console is a real unix socket served
by the test, reached through noded's relay (mutual TLS, a WebSocket)."""

from __future__ import annotations

import os
import pty
import select
import shutil
import socket
import socketserver
import ssl
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from corral.cli import console_client
from corral.node.hypervisor.fake import CONSOLES_DIR
from corral.paths import Paths
from corral.rpc.calls_instance import instance_start
from corral.rpc.wire import InstanceWire
from tests.helpers.cluster import TestCluster, running_cluster, unique_loopback
from tests.helpers.console import Console
from tests.helpers.instances import add, failed, ok
from tests.helpers.jobs import wait_final
from tests.helpers.noded import make_node_root, start_noded
from tests.helpers.rapi import READ_USER, Rapi
from tests.helpers.waiting import wait_until

ESCAPE = b"\x1d"


class _Echo(socketserver.BaseRequestHandler):
    received: list[bytes] = []  # what every connection sent, in order

    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.received.append(data)
            self.request.sendall(data)


class _ByeThenClose(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(b"bye\n")


@contextmanager
def serial_console(
    paths: Paths, name: str, handler: type[socketserver.BaseRequestHandler] = _Echo
) -> Iterator[Path]:
    """A unix-socket server where the fake hypervisor of the node root ``paths``
    looks for ``name``'s console."""
    path = paths.run_dir / CONSOLES_DIR / f"{name}.serial"
    path.parent.mkdir(parents=True, exist_ok=True)
    server = socketserver.ThreadingUnixStreamServer(str(path), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        path.unlink(missing_ok=True)


def console_process(cl: TestCluster, *args: str) -> subprocess.Popen[bytes]:
    """``gnt-instance console args...`` on pipes (no tty: no raw mode)."""
    return subprocess.Popen(
        [sys.executable, "-m", "corral.cli.gnt_instance", "console", *args],
        env=cl.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def read_until(proc: subprocess.Popen[bytes], wanted: bytes, timeout: float = 30) -> bytes:
    """What ``proc`` writes until ``wanted`` is in it (fails at EOF or after ``timeout``)."""
    assert proc.stdout is not None
    fd, seen = proc.stdout.fileno(), b""
    deadline = time.monotonic() + timeout
    while wanted not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"timed out waiting for {wanted!r}; got {seen!r}"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 4096)
            assert chunk, f"output ended before {wanted!r}: {seen!r} {proc.stderr!r}"
            seen += chunk
    return seen


def finish(proc: subprocess.Popen[bytes], timeout: float = 30) -> tuple[int, str]:
    """The exit code and stderr of ``proc``, once it has ended by itself."""
    assert proc.stderr is not None
    rc = proc.wait(timeout=timeout)
    err = proc.stderr.read().decode()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    return rc, err


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    # A short directory: a unix socket's path has at most 107 bytes.
    with running_cluster(tmp_path_factory.mktemp("con")) as cluster:
        ok(add(cluster, "c1", "-t", "diskless", "--no-install"))
        yield cluster


def test_typed_bytes_come_back_and_ctrl_bracket_detaches(cl: TestCluster) -> None:
    _Echo.received.clear()
    with serial_console(cl.paths, "c1"):
        proc = console_process(cl, "c1")
        assert proc.stdin is not None
        proc.stdin.write(b"hello console\n")
        proc.stdin.flush()
        assert read_until(proc, b"hello console\n") == b"hello console\n"
        # Bytes typed before Ctrl-] still go; nothing after it does.
        proc.stdin.write(b"last" + ESCAPE + b"never\n")
        proc.stdin.flush()
        rc, err = finish(proc)
        assert rc == 0, err
        wait_until(lambda: b"".join(_Echo.received).endswith(b"last"), 30, "the last bytes")
    assert b"".join(_Echo.received) == b"hello console\nlast"
    assert "Traceback" not in err


def test_relay_ends_when_the_console_socket_closes(cl: TestCluster) -> None:
    with serial_console(cl.paths, "c1", _ByeThenClose):
        proc = console_process(cl, "c1")
        assert read_until(proc, b"bye\n") == b"bye\n"
        # stdin stays open: the session ends because the console went away.
        rc, err = finish(proc)
    assert rc == 0, err


def test_console_description_everywhere(cl: TestCluster) -> None:
    with serial_console(cl.paths, "c1") as path:
        expected = {
            "instance": "c1",
            "kind": "ssh",
            "host": cl.node_name,
            "port": 22,
            "user": "root",
            "command": ["socat", "STDIO,raw,echo=0,escape=0x1d", f"UNIX-CONNECT:{path}"],
        }
        with cl.client() as client:
            job = client.submit_job([{"OP_ID": "OP_INSTANCE_CONSOLE", "instance_name": "c1"}])
            ((status, result),) = wait_final(client, [job], ("opresult",))
            assert status == "success" and result == [expected]
            rows = client.call("QueryInstances", ["c1"], ["console", "oper_state"], False)
            assert rows == [[expected, True]]
        # RAPI: a user with read access, as Ganeti's GET_ACCESS asks.
        cl.add_rapi_user(*READ_USER, "read")
        assert Rapi(cl, *READ_USER).get("/2/instances/c1/console") == expected
        assert Rapi(cl).request("GET", "/2/instances/c1/console").status == 401


def test_show_cmd_prints_ganeti_ssh_command(cl: TestCluster) -> None:
    with serial_console(cl.paths, "c1") as path:
        out = ok(cl.gnt("instance", "console", "--show-cmd", "c1"))
    known_hosts = cl.paths.data_dir / "known_hosts"
    assert out == (
        f"ssh -oEscapeChar=none -oHashKnownHosts=no -oGlobalKnownHostsFile={known_hosts}"
        " -oUserKnownHostsFile=/dev/null -oCheckHostIp=no -oConnectTimeout=10"
        f" -oHostKeyAlias={cl.cluster_name} -oPort=22 -oBatchMode=yes"
        f" -oStrictHostKeyChecking=yes -4 -t -t root@{cl.node_name}"
        f" 'socat STDIO,raw,echo=0,escape=0x1d UNIX-CONNECT:{path}'\n"
    )


def test_without_serial_console_the_message_is_printed(cl: TestCluster) -> None:
    assert ok(cl.gnt("instance", "console", "c1")) == "Console not available for fake hypervisor\n"


def test_stopped_instance_is_refused(cl: TestCluster) -> None:
    ok(add(cl, "c2", "-t", "diskless", "--no-install", "--no-start"))
    try:
        failed(
            cl.gnt("instance", "console", "c2"),
            "Failure: command execution error:\nInstance c2 is not running, can't get console",
        )
        with cl.client() as client:
            job = client.submit_job([{"OP_ID": "OP_INSTANCE_CONSOLE", "instance_name": "c2"}])
            ((status, result),) = wait_final(client, [job], ("opresult",))
        assert status == "error"
        assert result[0][1] == ["Instance c2 is not running (state ADMIN_down)"]
        cl.add_rapi_user(*READ_USER, "read")
        answer = Rapi(cl, *READ_USER).request("GET", "/2/instances/c2/console")
        assert answer.status == 503
    finally:
        ok(cl.gnt("instance", "remove", "-f", "c2"))


def _noded_context(cl: TestCluster, certfile: Path | None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(cl.paths.ca_cert)
    if certfile is not None:
        ctx.load_cert_chain(certfile)
    return ctx


def _upgrade(sock: ssl.SSLSocket, cl: TestCluster, name: str) -> bytes:
    sock.sendall(
        f"GET /console/{name} HTTP/1.1\r\nHost: {cl.node_ip}\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    answer = b""
    while b"\r\n\r\n" not in answer and (chunk := sock.recv(4096)):
        answer += chunk
    return answer


def test_noded_lets_in_only_the_cluster_client_certificate(cl: TestCluster) -> None:
    with serial_console(cl.paths, "c1"):
        # The node's own certificate: signed by the cluster CA, yet refused.
        ctx = _noded_context(cl, cl.paths.server_pem)
        with ctx.wrap_socket(socket.create_connection((cl.node_ip, cl.port), timeout=30)) as sock:
            assert _upgrade(sock, cl, "c1").startswith(b"HTTP/1.1 403 ")
        # No certificate at all: the TLS handshake itself fails.
        ctx = _noded_context(cl, None)
        connection = socket.create_connection((cl.node_ip, cl.port), timeout=30)
        with pytest.raises((ssl.SSLError, ConnectionError)), ctx.wrap_socket(connection) as sock:
            _upgrade(sock, cl, "c1")
            assert not sock.recv(1)  # TLS 1.3: the refusal comes with the first read
            raise ConnectionError("closed without an answer")
        # The cluster's client certificate: attached, bytes go both ways.
        sock, pending = console_client.connect(str(cl.paths.root), cl.node_ip, cl.port, "c1")
        with sock:
            sock.sendall(console_client.frame(2, b"ping"))
            frames = console_client.Frames(pending)
            while (item := frames.next()) is None:
                frames.feed(sock.recv(4096))
            assert item == (2, b"ping")


def test_relay_refuses_an_instance_not_running_here(cl: TestCluster) -> None:
    with pytest.raises(
        console_client.RelayError, match=r"\(404\): Instance nosuch is not running on this node"
    ):
        console_client.connect(str(cl.paths.root), cl.node_ip, cl.port, "nosuch")


def test_a_terminal_is_attached_raw_and_restored(cl: TestCluster) -> None:
    main_fd, tty_fd = pty.openpty()
    before = termios.tcgetattr(tty_fd)
    try:
        with serial_console(cl.paths, "c1"):
            proc = subprocess.Popen(
                [sys.executable, "-m", "corral.cli.gnt_instance", "console", "c1"],
                env=cl.env,
                stdin=tty_fd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            # Raw: each key goes at once (a cooked terminal would hold the line)...
            wait_until(lambda: not termios.tcgetattr(tty_fd)[3] & termios.ICANON, 30, "raw")
            os.write(main_fd, b"no newline")
            assert read_until(proc, b"no newline") == b"no newline"
            # ... and Ctrl-] is a byte like any other, which detaches.
            os.write(main_fd, ESCAPE)
            rc, err = finish(proc)
        assert rc == 0, err
        assert termios.tcgetattr(tty_fd) == before
    finally:
        os.close(main_fd)
        os.close(tty_fd)


def test_several_clients_at_once(cl: TestCluster) -> None:
    with serial_console(cl.paths, "c1"):
        procs = [console_process(cl, "c1") for _ in range(2)]
        for i, proc in enumerate(procs):
            assert proc.stdin is not None
            proc.stdin.write(f"client {i}\n".encode())
            proc.stdin.flush()
        for i, proc in enumerate(procs):
            assert read_until(proc, f"client {i}\n".encode()) == f"client {i}\n".encode()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.close()  # the end of the input detaches too
            assert finish(proc)[0] == 0


async def test_noded_stopping_detaches_its_consoles() -> None:
    # A node of its own (this one stops), in a short root for the socket's path.
    root = Path(tempfile.mkdtemp(prefix="h6s", dir="/tmp"))
    address = unique_loopback()
    node = start_noded(make_node_root(root, node_ip=address), address)
    try:
        inst: InstanceWire = {"name": "i1", "hypervisor": "fake", "memory": 1, "vcpus": 1}
        await node.run(instance_start(inst, False))
        with serial_console(node.paths, "i1"):
            console = Console(node, "i1")
            console.type("abc")
            assert console.wait_for(b"abc") == b"abc"
            assert node.stop(timeout=60)
            # Told why (1001: going away), not cut off by noded being killed.
            assert console.wait_closed() == b"\x03\xe9The node daemon stops"
            console.sock.close()
    finally:
        node.stop()
        shutil.rmtree(root, ignore_errors=True)
