"""Joining a node without SSH: noded's join mode, one-time tokens, the proofs
bound to the node's certificate (a man in the middle is refused), the key
that never leaves the node, and secrets kept 0600."""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral import testbed
from corral.crypto import certs
from corral.node import join_protocol as J
from corral.node import join_server
from corral.paths import Paths
from corral.process.daemons import start_daemon, stop_daemon
from corral.rpc.calls_node import version
from corral.services import join_tokens
from tests.helpers.cluster import Result, TestCluster, running_cluster
from tests.helpers.instances import failed, ok
from tests.helpers.multinode import free_address, start_joining_node
from tests.helpers.noded import Noded, daemon_env, noded_cmd
from tests.helpers.offline_config import change_durable_offline, durable_values

NODE2 = "node2.example.com"


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("join")) as cluster:
        yield cluster


@pytest.fixture
def joining(cl: TestCluster, tmp_path: Path) -> Iterator[Noded]:
    """A noded waiting to join with a fresh token; removed from the cluster afterwards."""
    node = start_joining_node(cl, tmp_path / "node2")
    node.name = NODE2
    try:
        yield node
    finally:
        node.stop()
        if NODE2 in ok(cl.gnt("node", "list", "--no-headers", "-o", "name")).split():
            ok(cl.gnt("node", "remove", NODE2))


def add(cl: TestCluster, node: Noded, *extra: str) -> Result:
    return cl.gnt("node", "add", "--node-ip", node.address, *extra, NODE2)


def node_names(cl: TestCluster) -> list[str]:
    return ok(cl.gnt("node", "list", "--no-headers", "-o", "name")).split()


def assert_untouched(cl: TestCluster, node: Noded) -> None:
    """The node is not in the config and still waits for a join, with no cluster file."""
    assert NODE2 not in node_names(cl)
    assert not join_server.is_joined(node.paths)
    assert not list(node.paths.data_dir.glob("ssconf_*"))


async def _post(address: str, port: int, path: str, body: object) -> tuple[int, Any]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    reader, writer = await asyncio.open_connection(address, port, ssl=ctx)
    data = json.dumps(body).encode()
    writer.write(
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n"
        "Connection: close\r\n\r\n".encode()
        + data
    )
    answer = await reader.read()
    writer.close()
    head, _, payload = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(payload)


def post(node: Noded, path: str, body: object) -> tuple[int, Any]:
    return asyncio.run(_post(node.address, node.port, path, body))


def test_join_mode_serves_only_the_join(joining: Noded) -> None:
    status, reply = post(joining, "/version", [])
    assert status == 403 and reply == [False, J.NOT_IN_CLUSTER]
    # The hello answers with a certificate request, never the key itself.
    status, reply = post(
        joining,
        J.HELLO_PATH,
        {"master_nonce": "n", "storage_units": [["file", "/x"]], "node_name": NODE2},
    )
    assert status == 200 and reply[0] is True
    assert "PRIVATE KEY" not in json.dumps(reply)
    assert "CERTIFICATE REQUEST" in reply[1]["csr"]


def test_show_join_info_prints_the_fingerprint(joining: Noded) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "corral.daemons.noded", "--show-join-info"],
        env=daemon_env(joining.paths),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cert = join_server.join_cert_file(joining.paths).read_bytes()
    assert f"Certificate fingerprint (SHA-256): {J.pem_fingerprint(cert)}" in out
    assert "State: waiting to join" in out and "Join token given: yes" in out


def test_join_writes_files_keeps_the_key_and_secrets_0600(cl: TestCluster, joining: Noded) -> None:
    paths = joining.paths
    key_file = join_server.node_key_file(paths)
    key_before = key_file.read_bytes()
    key_mtime = key_file.stat().st_mtime_ns
    ok(add(cl, joining))
    assert node_names(cl) == ["node1.example.com", NODE2]
    # The node's key predates the join and is the key of its new certificates.
    assert key_file.read_bytes() == key_before and key_file.stat().st_mtime_ns == key_mtime
    for pem in (paths.server_pem, paths.client_pem):
        data = pem.read_bytes()
        assert key_before.strip() in data
        assert certs.same_public_key(data, key_before)
        assert certs.verify_signed_by(data, cl.paths.ca_cert.read_bytes())
    assert paths.ca_cert.read_bytes() == cl.paths.ca_cert.read_bytes()
    assert paths.cluster_domain_secret.read_bytes() == cl.paths.cluster_domain_secret.read_bytes()
    for secret in (key_file, paths.server_pem, paths.client_pem, paths.cluster_domain_secret):
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600, secret
    assert stat.S_IMODE(cl.paths.state_db.stat().st_mode) == 0o600  # holds the tokens
    # The token is forgotten, and noded now serves the cluster's RPC (no restart).
    assert not join_server.token_file(paths).exists()
    assert joining.pid is not None

    async def answer() -> int:
        async with joining.client(cl.paths) as rpc:
            return await rpc.run(joining.target, version())

    assert asyncio.run(answer()) == 3000000


def _token_text(cl: TestCluster, **change: object) -> str:
    token = J.parse_token(testbed.make_token(cl.paths))
    for name, value in change.items():
        setattr(token, name, value)
    return token.text()


def expired_token(cl: TestCluster) -> str:
    """A token past its time (masterd stopped meanwhile: no command makes one)."""
    fingerprint = J.pem_fingerprint(cl.paths.ca_cert.read_bytes())
    stop_daemon(cl.paths, "corral-masterd")
    try:
        return change_durable_offline(
            cl.paths, lambda state: join_tokens.create(state, fingerprint, ttl=-1)
        )
    finally:
        start_daemon([sys.executable, "-m", "corral.daemons.masterd"], daemon_env(cl.paths))


def _joining_with(cl: TestCluster, root: Path, token: str) -> Noded:
    node = start_joining_node(cl, root, token=False)
    node.name = NODE2
    join_server.save_token(node.paths, token)
    return node


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("wrong secret", "did not prove knowledge of its join token"),
        ("unknown", "was not made by this cluster's master"),
        ("expired", "has expired"),
        ("other CA", "is not the one named in this node's join token"),
    ],
)
def test_bad_tokens_are_refused(cl: TestCluster, tmp_path: Path, kind: str, message: str) -> None:
    if kind == "wrong secret":
        token = _token_text(cl, secret=b"\1" * 32)
    elif kind == "unknown":
        token = _token_text(cl, token_id="0123456789abcdef")
    elif kind == "expired":
        token = expired_token(cl)
    else:
        token = _token_text(cl, ca_fingerprint="0" * 64)
    node = _joining_with(cl, tmp_path / "node2", token)
    try:
        failed(add(cl, node), message)
        assert_untouched(cl, node)
    finally:
        node.stop()


def test_a_token_joins_once(cl: TestCluster, tmp_path: Path) -> None:
    token = testbed.make_token(cl.paths)
    node = _joining_with(cl, tmp_path / "node2", token)
    try:
        ok(add(cl, node))
        ok(cl.gnt("node", "remove", NODE2))
        join_server.save_token(node.paths, token)  # back in join mode: the same token again
        failed(add(cl, node), "was used already")
        assert_untouched(cl, node)
    finally:
        node.stop()


def test_a_failed_join_leaves_the_token_usable(cl: TestCluster, tmp_path: Path) -> None:
    good = testbed.make_token(cl.paths)
    wrong_ca = J.parse_token(good)
    wrong_ca.ca_fingerprint = "0" * 64
    node = _joining_with(cl, tmp_path / "node2", wrong_ca.text())
    try:
        # The node refuses at the very end of the exchange: nothing was changed...
        failed(add(cl, node), "is not the one named in this node's join token")
        assert_untouched(cl, node)
        # ...and the token still joins a node.
        join_server.save_token(node.paths, good)
        ok(add(cl, node))
        assert NODE2 in node_names(cl)
        ok(cl.gnt("node", "remove", NODE2))
    finally:
        node.stop()


def test_token_command_and_bad_ttl(cl: TestCluster) -> None:
    out = ok(cl.gnt("node", "join-token", "--ttl", "60")).strip()
    token = J.parse_token(out)
    assert token.ca_fingerprint == J.pem_fingerprint(cl.paths.ca_cert.read_bytes())
    # Only a hash of the secret is kept.
    stored = json.dumps(durable_values(cl.paths, join_tokens.PREFIX))
    assert token.token_id in stored and out.split(".")[2] not in stored
    failed(cl.gnt("node", "join-token", "--ttl", "0"), "Invalid --ttl 0")


def test_bad_token_on_the_node_command_line(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "corral.daemons.noded", "-b", "127.0.0.1", "--join-token", "x"],
        env=daemon_env(Paths(tmp_path)),
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 1 and "Invalid join token" in out.stderr


@pytest.mark.parametrize(
    ("args", "rc", "message"),
    [
        (["--join-token-file", "/nonexistent/token"], 1, "Cannot read the join token file"),
        (["--join-token", "-", "--join-token-file", "t"], 2, "not allowed with"),
    ],
)
def test_bad_token_file_options(tmp_path: Path, args: list[str], rc: int, message: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "corral.daemons.noded", "-b", "127.0.0.1", *args],
        env={**os.environ, **daemon_env(Paths(tmp_path))},
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == rc and message in out.stderr, out.stderr


@pytest.mark.parametrize("given", ["file", "stdin"])
def test_a_token_from_a_file_or_stdin_stays_out_of_ps(
    cl: TestCluster, tmp_path: Path, given: str
) -> None:
    token = testbed.make_token(cl.paths)
    paths = Paths((tmp_path / "node2").absolute())
    paths.root.mkdir()
    address = free_address(cl.port, {cl.node_ip})
    cmd, stdin = noded_cmd(address, cl.port), ""
    if given == "file":
        token_file = tmp_path / "node2.token"
        token_file.write_text(token + "\n")
        token_file.chmod(0o600)
        cmd += ["--join-token-file", str(token_file)]
    else:
        cmd, stdin = [*cmd, "--join-token", "-"], token + "\n"
    started = subprocess.run(
        cmd,
        input=stdin,
        env={**os.environ, **daemon_env(paths)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
    )
    node = Noded(paths, address, cl.port, NODE2)
    try:
        assert started.returncode == 0, started.stderr
        assert node.pid is not None
        command_line = Path(f"/proc/{node.pid}/cmdline").read_bytes()
        assert J.parse_token(token).token_id.encode() not in command_line
        assert token.split(".")[2].encode() not in command_line
        ok(add(cl, node))
        assert NODE2 in node_names(cl)
        ok(cl.gnt("node", "remove", NODE2))
    finally:
        node.stop()


class _Relay:
    """A man in the middle: TLS with its own certificate to the master, TLS to the node."""

    def __init__(self, listen: str, port: int, target: Noded, tmp_path: Path) -> None:
        cert, key = certs.make_self_signed_cert("mitm", 1)
        certs.write_pem(tmp_path / "mitm.pem", cert, key)
        self._server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._server_ctx.load_cert_chain(tmp_path / "mitm.pem")
        self._target = target
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(listen, port), daemon=True)
        self._thread.start()
        self._ready.wait(30)

    def _run(self, listen: str, port: int) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, listen, port, ssl=self._server_ctx)
        )
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        up_reader, up_writer = await asyncio.open_connection(
            self._target.address, self._target.port, ssl=ctx
        )

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            while data := await src.read(65536):
                dst.write(data)
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)


def test_man_in_the_middle_is_refused(cl: TestCluster, joining: Noded, tmp_path: Path) -> None:
    address = free_address(cl.port, {cl.node_ip, joining.address})
    relay = _Relay(address, cl.port, joining, tmp_path)
    try:
        result = cl.gnt("node", "add", "--node-ip", address, NODE2)
        failed(result, "man in the middle", "nothing was sent to it")
    finally:
        relay.stop()
    assert_untouched(cl, joining)
    # The token was not used up: the node joins directly afterwards.
    ok(add(cl, joining))
