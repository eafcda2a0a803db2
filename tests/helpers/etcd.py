"""Real etcd clusters for tests: Debian's etcd members on loopback, mutual TLS
under a CA of the test's own (made by Corral's code, as the cluster CA is).

``etcd_one`` and ``etcd_three`` are clusters of one and three members shared
by the whole session: each test takes a key prefix of its own
(:meth:`EtcdBed.prefix`), so tests do not see each other's keys.  A test that
kills members starts a cluster of its own (:func:`started_cluster`).
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from corral.crypto.certs import make_ca, make_signed_cert, write_pem
from corral.state.etcd.client import EtcdClient, client_ssl_context
from corral.state.etcd.server import EtcdCluster, Tls

DAYS = 2


@dataclass
class EtcdBed:
    """A running cluster and what a client needs to call it."""

    cluster: EtcdCluster
    ca: Path
    client_pem: Path

    def client(self, endpoints: list[str] | None = None) -> EtcdClient:
        """A client of every member, or of ``endpoints`` (make it inside the
        test's event loop)."""
        tls = client_ssl_context(self.ca, self.client_pem)
        return EtcdClient(endpoints or self.cluster.endpoints, tls)

    @staticmethod
    def prefix() -> str:
        """Keys of one test's own."""
        return f"/corral-test/{uuid.uuid4().hex}/"


def loopback_ips(count: int) -> list[str]:
    """``count`` random addresses of 127.0.0.0/8 (not 127.0.0.1: other tests' ports)."""
    net = f"127.{random.randrange(1, 255)}.{random.randrange(0, 255)}"
    return [f"{net}.{host}" for host in range(1, count + 1)]


def make_bed(root: Path, size: int) -> EtcdBed:
    """Certificates and members (not started) of a cluster of ``size`` under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    ca, ca_key = make_ca("etcd-test-ca", DAYS)
    write_pem(root / "ca.pem", ca, private=False)
    cert, key = make_signed_cert(ca, ca_key, "corral-masterd", DAYS, server=False, client=True)
    write_pem(root / "client.pem", cert, key)
    ips = loopback_ips(size)
    tls_of = {}
    for index, ip in enumerate(ips, 1):
        name = f"m{index}"
        # Linux sends from 127.0.0.1 to any loopback address, and etcd checks a
        # peer's address against its certificate: both are named.
        ips_named = [ip, "127.0.0.1"]
        cert, key = make_signed_cert(
            ca, ca_key, name, DAYS, server=True, client=True, ips=ips_named
        )
        write_pem(root / f"{name}.pem", cert, key)
        tls_of[name] = Tls(root / "ca.pem", root / f"{name}.pem", root / f"{name}.pem")
    cluster = EtcdCluster.on_loopback(root, tls_of, ips)
    return EtcdBed(cluster, root / "ca.pem", root / "client.pem")


@asynccontextmanager
async def started_cluster(root: Path, size: int) -> AsyncIterator[EtcdBed]:
    """A cluster of ``size`` members, running inside the test's event loop."""
    bed = make_bed(root, size)
    client = bed.client()
    try:
        await bed.cluster.start(client)
        yield bed
    finally:
        await client.close()
        await bed.cluster.stop()


@contextmanager
def running_cluster(root: Path, size: int) -> Iterator[EtcdBed]:
    """A cluster of ``size`` members that outlives event loops (session fixtures)."""
    bed = make_bed(root, size)

    async def start() -> None:
        client = bed.client()
        try:
            await bed.cluster.start(client)
        finally:
            await client.close()

    try:
        _run_aside(start())
        yield bed
    finally:
        _run_aside(bed.cluster.stop())


def _run_aside(work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` to its end in an event loop of its own (in a thread: the
    caller may be inside a test's running loop)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, work).result()


@pytest.fixture(scope="session")
def etcd_one(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdBed]:
    """A one-member etcd cluster for the whole session."""
    with running_cluster(tmp_path_factory.mktemp("etcd1"), 1) as bed:
        yield bed


@pytest.fixture(scope="session")
def etcd_three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdBed]:
    """A three-member etcd cluster for the whole session."""
    with running_cluster(tmp_path_factory.mktemp("etcd3"), 3) as bed:
        yield bed


@pytest.fixture
async def etcd_three_client(etcd_three: EtcdBed) -> AsyncIterator[EtcdClient]:
    """A client of every member of ``etcd_three``, closed after the test."""
    made = etcd_three.client()
    try:
        yield made
    finally:
        await made.close()


class AnswerCutter:
    """A TCP relay in front of one member that, once armed, lets a request
    through but cuts the connection instead of relaying its answer: a write
    whose answer was lost (the member died, the network broke).  One request
    is one read of the client's (the stores' requests are small)."""

    def __init__(self, member_url: str) -> None:
        self._host, port = member_url.removeprefix("https://").rsplit(":", 1)
        self._port = int(port)
        self._server: asyncio.Server | None = None
        self.armed = False
        self._spared = 0
        self._cutting = False
        self.cut = 0

    def arm(self, spare: int = 0) -> None:
        """Cut the answer of the request after the next ``spare`` ones."""
        self.armed, self._spared = True, spare

    async def start(self) -> str:
        """Listen on the member's own address (its certificate names it); the URL."""
        self._server = await asyncio.start_server(self._relay, self._host, 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"https://{self._host}:{port}"

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self._host, self._port)
        tasks = [
            asyncio.create_task(self._pump(reader, up_writer, answers=False)),
            asyncio.create_task(self._pump(up_reader, writer, answers=True)),
        ]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        for end in (writer, up_writer):
            end.close()

    async def _pump(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, *, answers: bool
    ) -> None:
        while data := await source.read(65536):
            if answers and self._cutting:
                self._cutting = False
                self.cut += 1
                return
            sink.write(data)
            await sink.drain()
            if not answers and self.armed:  # a request went through
                if self._spared:
                    self._spared -= 1
                else:
                    self.armed, self._cutting = False, True
