"""Temp node roots with cluster crypto, and real corral-noded processes on them.

Typical use::

    paths = make_node_root(tmp_path / "node1")
    with running_noded(paths) as node:
        async with node.client() as rpc:
            result = await rpc.result(node.target, version())
        assert await node.run(version()) == C.PROTOCOL_VERSION
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import corral
from corral.crypto.certs import create_cluster_crypto, write_node_cert
from corral.paths import ROOT_ENV, Paths
from corral.process.daemons import running_pid, start_daemon, stop_daemon
from corral.rpc.result import NodeAddress

if TYPE_CHECKING:
    from corral.rpc.client import RpcClient
    from corral.rpc.declare import Request

R = TypeVar("R")

NODED = "corral-noded"
REPO_ROOT = Path(corral.__file__).resolve().parent.parent


def free_port(address: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``address`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def make_node_root(
    root: Path,
    *,
    node_name: str = "node1.example.com",
    node_ip: str = "127.0.0.1",
    cluster_name: str = "cluster.example.com",
    cluster: Paths | None = None,
) -> Paths:
    """A node root with the cluster directories and crypto.

    Without ``cluster`` a new cluster CA is made; with it, the node joins that
    cluster: it gets the cluster's CA, client certificate and domain secret and
    its own node certificate signed by the cluster CA.
    """
    paths = Paths(root.absolute())
    for directory in paths.cluster_dirs():
        directory.mkdir(parents=True, exist_ok=True)
    if cluster is None:
        create_cluster_crypto(paths, cluster_name, node_name, node_ip)
        return paths
    for name in ("ca_cert", "ca_key", "client_pem", "cluster_domain_secret"):
        shutil.copy2(getattr(cluster, name), getattr(paths, name))
    write_node_cert(
        paths, cluster.ca_cert.read_bytes(), cluster.ca_key.read_bytes(), node_name, node_ip
    )
    return paths


def daemon_env(paths: Paths) -> dict[str, str]:
    """Environment for a daemon of this repository running on ``paths``."""
    python_path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return {ROOT_ENV: str(paths.root), "PYTHONPATH": python_path}


def noded_cmd(address: str, port: int, *extra: str) -> list[str]:
    """The command line that runs noded from this repository."""
    return [sys.executable, "-m", "corral.daemons.noded", "-b", address, "-p", str(port), *extra]


@dataclass
class Noded:
    """A noded started by :func:`start_noded`."""

    paths: Paths
    address: str
    port: int
    name: str = "node1.example.com"
    # The master's root when the node is in a running cluster: the calls of
    # :meth:`client` then carry that master's fence token (tests.helpers.fencing).
    master: Paths | None = None

    @property
    def pid(self) -> int | None:
        return running_pid(self.paths.pid_file(NODED))

    @property
    def target(self) -> NodeAddress:
        """This node as RPC calls address it (its name is the key of results)."""
        return NodeAddress(self.name, self.address)

    def client(self, paths: Paths | None = None, certfile: Path | None = None) -> RpcClient:
        """An RPC client for this noded's port, with ``paths``' CA and client
        cert (and ``master``'s fence token)."""
        from corral.rpc.https import https_client
        from tests.helpers.fencing import master_token

        rpc = https_client(paths or self.paths, self.port, certfile=certfile)
        if self.master is not None:
            rpc.fence = master_token(self.master)
        return rpc

    async def run(self, request: Request[R]) -> R:
        """The payload of one call to this noded; NodeCallError if it fails."""
        async with self.client() as rpc:
            return await rpc.run(self.target, request, f"{request.call.name} on {self.name}")

    def run_sync(self, request: Request[R]) -> R:
        """:meth:`run` from synchronous code (outside an event loop)."""
        return asyncio.run(self.run(request))

    def stop(self, timeout: float = 5.0) -> bool:
        return stop_daemon(self.paths, NODED, timeout)


def start_noded(
    paths: Paths, address: str = "127.0.0.1", port: int | None = None, *extra: str
) -> Noded:
    """Start noded in the background on ``paths`` and wait until it serves."""
    port = port or free_port(address)
    start_daemon(noded_cmd(address, port, *extra), daemon_env(paths), timeout=30)
    return Noded(paths, address, port)


@contextmanager
def running_noded(
    paths: Paths, address: str = "127.0.0.1", port: int | None = None
) -> Iterator[Noded]:
    """A noded for the duration of the ``with`` block."""
    node = start_noded(paths, address, port)
    try:
        yield node
    finally:
        node.stop()
