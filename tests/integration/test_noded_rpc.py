"""A real corral-noded answering RPC calls through RpcClient over mutual TLS."""

from __future__ import annotations

import base64
import json
import stat
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from corral import constants as C
from corral import errors
from corral.crypto.tls import ssl_client_context
from tests.helpers.noded import Noded, free_port, make_node_root, running_noded


@pytest.fixture(scope="module")
def noded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Noded]:
    paths = make_node_root(tmp_path_factory.mktemp("node1"))
    with running_noded(paths) as node:
        yield node


async def test_version_on_many_nodes_including_an_unreachable_one(noded: Noded) -> None:
    dead_port = free_port()
    async with noded.client() as rpc:
        results = await rpc.call([noded.target, ("node2", "127.0.0.1")], "version", [])
    assert results[noded.name].payload == C.PROTOCOL_VERSION
    assert not results[noded.name].failed
    # node2 is the same address: both share the port, so it answers too.
    assert results["node2"].payload == C.PROTOCOL_VERSION
    async with noded.client() as rpc:
        rpc._port = dead_port  # nothing listens there
        dead = await rpc.call_one("node3", "127.0.0.1", "version", [])
    assert dead.offline and dead.failed
    assert "Connection refused" in str(dead.fail_msg)
    with pytest.raises(errors.OpExecError, match=r"^Cannot reach node3: Cannot connect"):
        dead.raise_if_failed("Cannot reach node3")


async def test_node_info_and_verify(noded: Noded) -> None:
    async with noded.client() as rpc:
        unit = ["file", "/srv/ganeti/file-storage"]
        info = await rpc.call_one(*noded.target, "node_info", [[unit]])
        verify = await rpc.call_one(*noded.target, "node_verify", [{"version": None}, "node1"])
    assert info.payload["memory_total"] > 0
    assert info.payload["storage"][0]["path"] == "/srv/ganeti/file-storage"
    assert verify.payload["version"] == C.PROTOCOL_VERSION
    assert verify.payload["node_name"] == "node1"
    assert verify.payload["certificate"]["issuer"] == "cluster.example.com"


async def test_hooks_runner(noded: Noded) -> None:
    directory = noded.paths.hooks_dir / "cluster-init-post.d"
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "10-env"
    script.write_text('#!/bin/sh\necho "$GANETI_CLUSTER"\n')
    script.chmod(0o755)
    env = {"GANETI_CLUSTER": "cluster.example.com"}
    async with noded.client() as rpc:
        result = await rpc.call_one(*noded.target, "hooks_runner", ["cluster-init", "post", env])
        empty = await rpc.call_one(*noded.target, "hooks_runner", ["cluster-init", "pre", env])
    assert result.payload == [
        ["cluster-init-post.d/10-env", C.HKR_SUCCESS, "cluster.example.com\n"]
    ]
    assert empty.payload == []


async def test_test_delay_and_timeouts(noded: Noded) -> None:
    async with noded.client() as rpc:
        ok = await rpc.call_one(*noded.target, "test_delay", [0.1])
        late = await rpc.call_one(*noded.target, "test_delay", [1], timeout=0.3)
        bad = await rpc.call_one(*noded.target, "test_delay", ["soon"])
        after = await rpc.call_one(*noded.target, "version", [])
    assert not ok.failed and ok.payload is None
    assert late.failed and not late.offline
    assert "timed out after 0.3 s" in str(late.fail_msg)
    assert bad.fail_msg == "Invalid delay duration 'soon'"
    assert after.payload == C.PROTOCOL_VERSION  # a failing handler does not stop noded


async def test_upload_file(noded: Noded) -> None:
    data = base64.b64encode(b"node1\nnode2\n").decode()
    name = "/var/lib/ganeti/ssconf_node_list"
    async with noded.client() as rpc:
        ok = await rpc.call_one(
            *noded.target, "upload_file", [name, data, 0o644, None, None, None, None]
        )
        refused = await rpc.call_one(
            *noded.target, "upload_file", ["/etc/shadow", data, 0o644, None, None, None, None]
        )
    assert not ok.failed
    target = noded.paths.ssconf_file("node_list")
    assert target.read_bytes() == b"node1\nnode2\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert refused.fail_msg == "upload_file: /etc/shadow is not a file that can be uploaded"


async def test_wrong_calls(noded: Noded) -> None:
    async with noded.client() as rpc:
        with pytest.raises(errors.ProgrammerError, match="Unknown RPC call"):
            await rpc.call([noded.target], "no_such_call", [])
        with pytest.raises(errors.ProgrammerError, match="takes 1 arguments"):
            await rpc.call_one(*noded.target, "test_delay", [])
    # The same mistakes straight on the wire.
    ctx = ssl_client_context(noded.paths)
    base = f"https://{noded.address}:{noded.port}"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session:
        async with session.post(f"{base}/no_such_call", data=b"[]") as resp:
            assert resp.status == 404
            assert json.loads(await resp.read()) == [False, "Unknown RPC call 'no_such_call'"]
        async with session.post(f"{base}/test_delay", data=b"[]") as resp:
            assert resp.status == 400
            assert "takes 1 arguments" in json.loads(await resp.read())[1]
        async with session.post(f"{base}/version", data=b"{not json") as resp:
            assert resp.status == 400


async def test_storage_paths_are_below_the_node_root(noded: Noded, tmp_path: Path) -> None:
    async with noded.client() as rpc:
        unit = ["file", str(tmp_path / "nowhere")]
        result = await rpc.call_one(*noded.target, "node_info", [[unit]])
    assert result.failed and "storage info" in str(result.fail_msg)
