"""The disk stream of ``gnt-instance move`` between two real nodeds (mutual TLS
under one cluster CA): bytes copied exactly, foreign certificates refused,
unused transfers expiring, dead transfers undone when noded starts again."""

from __future__ import annotations

import os
import secrets
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from corral.daemons.util import start_daemon
from corral.paths import Paths
from corral.rpc.client import RpcClient
from tests.helpers.cluster import unique_loopback
from tests.helpers.noded import Noded, daemon_env, free_port, make_node_root, noded_cmd, start_noded
from tests.helpers.waiting import wait_until, wait_until_async

MIB = 1024 * 1024


class Pair:
    def __init__(self, source: Noded, target: Noded) -> None:
        self.source, self.target = source, target


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    root = tmp_path_factory.mktemp("stream")
    src_ip, dst_ip = unique_loopback(), unique_loopback()
    port = free_port(src_ip)
    src_paths = make_node_root(root / "src", node_ip=src_ip)
    dst_paths = make_node_root(
        root / "dst", node_name="node2.example.com", node_ip=dst_ip, cluster=src_paths
    )
    source = start_noded(src_paths, src_ip, port)
    try:
        target = start_noded(dst_paths, dst_ip, port)
        target.name = "node2.example.com"
        try:
            yield Pair(source, target)
        finally:
            target.stop()
    finally:
        source.stop()


def disk(name: str, index: int, size_mib: int) -> dict[str, Any]:
    return {
        "template": "file",
        "logical_id": ["loop", f"/srv/ganeti/file-storage/{name}/disk{index}"],
        "size": size_mib,
        "uuid": f"{name}-{index}",
        "iv_name": f"disk/{index}",
        "name": None,
        "mode": "rw",
    }


def local(paths: Paths, desc: dict[str, Any]) -> Path:
    return paths.from_wire(desc["logical_id"][1])


def write_source(paths: Paths, desc: dict[str, Any], content: bytes) -> None:
    path = local(paths, desc)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)


async def call(node: Noded, name: str, *args: Any) -> Any:
    async with RpcClient(node.paths, node.port) as rpc:
        res = await rpc.call_one(node.name, node.address, name, list(args))
    res.raise_if_failed(name)
    return res.payload


async def copy(pair: Pair, tid: str, disks: list[dict[str, Any]]) -> dict[str, Any]:
    await call(pair.target, "transfer_prepare", tid, disks, 60)
    await call(pair.source, "transfer_send", tid, pair.target.address, disks)
    while True:
        status = await call(pair.source, "transfer_status", tid, 5)
        if status["state"] != "running":
            return dict(status)


async def test_disks_copied_byte_for_byte(pair: Pair) -> None:
    name = f"inst-{secrets.token_hex(3)}"
    disks = [disk(name, 0, 9), disk(name, 1, 1), disk(name, 2, 2)]
    contents = [
        # Not a whole number of chunks; a chunk of zeros (skipped on the target).
        os.urandom(4 * MIB) + bytes(4 * MIB) + os.urandom(MIB),
        os.urandom(MIB),
        # A source file shorter than its disk, not a whole number of blocks.
        os.urandom(MIB + 100),
    ]
    for desc, content in zip(disks, contents, strict=True):
        write_source(pair.source.paths, desc, content)
    tid = secrets.token_hex(16)
    status = await copy(pair, tid, disks)
    assert status["state"] == "done", status
    assert [d["sent"] for d in status["disks"]] == [9 * MIB, MIB, MIB + 100]
    await call(pair.target, "transfer_finish", tid, True)
    await call(pair.source, "transfer_finish", tid, True)
    for desc, content in zip(disks, contents, strict=True):
        received = local(pair.target.paths, desc).read_bytes()
        assert len(received) == desc["size"] * MIB
        assert received == content + bytes(len(received) - len(content))
    # The transfer is over: its id is no longer accepted.
    with pytest.raises(Exception, match="No transfer"):
        await call(pair.source, "transfer_status", tid, 0)


async def test_failed_transfer_removes_target_disks(pair: Pair) -> None:
    name = f"inst-{secrets.token_hex(3)}"
    disks = [disk(name, 0, 2)]
    # The source disk is missing: the send fails, the target's disk goes on finish.
    tid = secrets.token_hex(16)
    await call(pair.target, "transfer_prepare", tid, disks, 60)
    assert local(pair.target.paths, disks[0]).exists()
    with pytest.raises(Exception, match="Cannot open disk"):
        await call(pair.source, "transfer_send", tid, pair.target.address, disks)
    await call(pair.target, "transfer_finish", tid, False)
    assert not local(pair.target.paths, disks[0]).exists()


async def test_existing_target_disk_is_refused_and_kept(pair: Pair) -> None:
    name = f"inst-{secrets.token_hex(3)}"
    disks = [disk(name, 0, 1), disk(name, 1, 1)]
    write_source(pair.target.paths, disks[1], b"keep me")
    with pytest.raises(Exception, match="already exists"):
        await call(pair.target, "transfer_prepare", secrets.token_hex(16), disks, 60)
    assert not local(pair.target.paths, disks[0]).exists()
    assert local(pair.target.paths, disks[1]).read_bytes() == b"keep me"


async def test_unused_transfer_expires(pair: Pair) -> None:
    name = f"inst-{secrets.token_hex(3)}"
    disks = [disk(name, 0, 1)]
    await call(pair.target, "transfer_prepare", secrets.token_hex(16), disks, 0.5)
    path = local(pair.target.paths, disks[0])
    assert path.exists()
    await wait_until_async(lambda: not path.exists(), timeout=30, what="expired disk removed")


def _client_ctx(ca: Path, cert: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.check_hostname = False
    ctx.load_cert_chain(cert)
    return ctx


async def test_foreign_certificate_refused_by_receive_endpoint(pair: Pair, tmp_path: Path) -> None:
    name = f"inst-{secrets.token_hex(3)}"
    disks = [disk(name, 0, 1)]
    tid = secrets.token_hex(16)
    await call(pair.target, "transfer_prepare", tid, disks, 60)
    other = make_node_root(tmp_path / "other")  # same names, its own CA
    url = f"https://{pair.target.address}:{pair.target.port}/transfer/{tid}/0"
    # The other cluster's client certificate (trusting the right CA for the server).
    ctx = _client_ctx(pair.target.paths.ca_cert, other.client_pem)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as http:
        with pytest.raises(aiohttp.ClientError):
            async with http.put(url, data=b"x" * MIB) as resp:
                await resp.read()
    # The disk was not written; the cluster's own client still may send.
    assert local(pair.target.paths, disks[0]).read_bytes() == bytes(MIB)
    ctx = _client_ctx(pair.target.paths.ca_cert, pair.source.paths.client_pem)
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as http,
        http.put(url, data=b"y" * MIB) as resp,
    ):
        answer = await resp.json()
    assert answer[0] is True and answer[1]["bytes"] == MIB
    await call(pair.target, "transfer_finish", tid, False)


async def test_dead_transfer_undone_when_noded_starts(pair: Pair, tmp_path: Path) -> None:
    ip = unique_loopback()
    paths = make_node_root(tmp_path / "n3", node_ip=ip, cluster=pair.source.paths)
    node = start_noded(paths, ip, pair.source.port)
    node.name = "node3"
    name = f"inst-{secrets.token_hex(3)}"
    disks = [disk(name, 0, 1)]
    try:
        await call(node, "transfer_prepare", secrets.token_hex(16), disks, 600)
        assert local(paths, disks[0]).exists()
        pid = node.pid
        assert pid is not None
        os.kill(pid, 9)
        wait_until(lambda: node.pid is None, timeout=30, what="noded dead")
        assert local(paths, disks[0]).exists()
        start_daemon(noded_cmd(ip, node.port), daemon_env(paths), timeout=30)
        assert not local(paths, disks[0]).exists()
        assert not list((paths.data_dir / "transfers").glob("*.json"))
    finally:
        node.stop()


async def test_plain_tls_copy_baseline(pair: Pair) -> None:
    answer = await call(pair.source, "test_tls_copy", pair.target.address, 10 * MIB + 5)
    assert answer["bytes"] == 10 * MIB + 5 and answer["seconds"] > 0
