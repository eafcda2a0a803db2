"""Mutual TLS: noded serves only clients with a certificate of the cluster CA,
and the client accepts only a node certificate of the cluster CA."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from corral import constants as C
from corral.paths import Paths
from corral.rpc.calls_node import version
from tests.helpers.noded import Noded, make_node_root, running_noded


@pytest.fixture(scope="module")
def noded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Noded]:
    paths = make_node_root(tmp_path_factory.mktemp("node1"))
    with running_noded(paths) as node:
        yield node


@pytest.fixture(scope="module")
def other_cluster(tmp_path_factory: pytest.TempPathFactory) -> Paths:
    """Another cluster, with the same names but its own CA."""
    return make_node_root(tmp_path_factory.mktemp("other"))


def client_context(ca: Path, certfile: Path | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.check_hostname = False
    if certfile is not None:
        ctx.load_cert_chain(certfile)
    return ctx


async def post_version(node: Noded, ctx: ssl.SSLContext) -> object:
    url = f"https://{node.address}:{node.port}/version"
    connector = aiohttp.TCPConnector(ssl=ctx)
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.post(url, data=b"[]") as resp,
    ):
        return await resp.json()


async def test_cluster_client_is_served(noded: Noded) -> None:
    ctx = client_context(noded.paths.ca_cert, noded.paths.client_pem)
    assert await post_version(noded, ctx) == [True, C.PROTOCOL_VERSION]


async def test_client_without_certificate_is_refused(noded: Noded) -> None:
    ctx = client_context(noded.paths.ca_cert, None)
    with pytest.raises(aiohttp.ClientError):
        await post_version(noded, ctx)


async def test_client_with_certificate_of_another_ca_is_refused(
    noded: Noded, other_cluster: Paths
) -> None:
    # It trusts our CA, so only the server's check can refuse it.
    ctx = client_context(noded.paths.ca_cert, other_cluster.client_pem)
    with pytest.raises(aiohttp.ClientError):
        await post_version(noded, ctx)
    async with noded.client(certfile=other_cluster.client_pem) as rpc:
        result = await rpc.result(noded.target, version())
    assert result.failed and not result.offline


async def test_client_refuses_node_of_another_ca(noded: Noded, other_cluster: Paths) -> None:
    async with noded.client(paths=other_cluster) as rpc:
        result = await rpc.result(noded.target, version())
    assert result.failed and not result.offline
    assert "TLS error" in str(result.fail_msg)
    assert "certificate verify failed" in str(result.fail_msg)


async def test_node_certificate_from_the_cluster_ca_is_accepted(
    noded: Noded, tmp_path: Path
) -> None:
    # A second node of the same cluster presenting its node certificate as a client.
    node2 = make_node_root(tmp_path / "node2", node_name="node2", cluster=noded.paths)
    async with noded.client(paths=node2, certfile=node2.server_pem) as rpc:
        result = await rpc.result(noded.target, version())
    assert result.payload == C.PROTOCOL_VERSION
