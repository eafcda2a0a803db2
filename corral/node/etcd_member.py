"""The etcd member a master candidate's noded runs (:mod:`corral.state.etcd.server`).

The master asks a node to run a member (its name, ports and the cluster it
forms or joins); noded keeps that wish in ``etcd/member.json`` under the
node's data directory, beside the member's data, and runs the member while
noded runs: a noded that starts again (after a crash, a reboot, kill -9 of
the member) starts its member again, which rejoins with its data.  The
member listens on the node's primary IP only, with the node's certificate
for both its peers and its clients (mutual TLS under the cluster CA).
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from corral import constants as C
from corral import errors
from corral.fileio import atomic_write
from corral.paths import Paths
from corral.state.etcd.server import EtcdMember, Member, Tls

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemberWish:
    """What the master asked for: this node's member and its cluster."""

    name: str
    ip: str
    client_port: int
    peer_port: int
    initial_cluster: dict[str, str]
    new: bool

    def member(self) -> Member:
        return Member(self.name, self.ip, self.client_port, self.peer_port)

    def cluster(self) -> list[Member]:
        return [_peer(name, url) for name, url in sorted(self.initial_cluster.items())]


def _peer(name: str, url: str) -> Member:
    parts = urlsplit(url)
    if parts.scheme != "https" or parts.hostname is None or parts.port is None:
        raise errors.OpPrereqError(f"etcd peer URL {url!r} of {name} is not https://IP:PORT")
    return Member(name, parts.hostname, 0, parts.port)


def etcd_root(paths: Paths) -> Path:
    return paths.data_dir / "etcd"


def _wish_file(paths: Paths) -> Path:
    return etcd_root(paths) / "member.json"


def _read_wish(paths: Paths) -> MemberWish | None:
    try:
        raw = json.loads(_wish_file(paths).read_text())
    except FileNotFoundError:
        return None
    return MemberWish(**raw)


class MemberKeeper:
    """The member of one node (one per node root, as noded runs one per node)."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        self.wish: MemberWish | None = None
        self.process: EtcdMember | None = None
        self._lock = asyncio.Lock()

    def _tls(self) -> Tls:
        return Tls(self.paths.ca_cert, self.paths.server_pem, self.paths.server_pem)

    async def start(self, wish: MemberWish) -> dict[str, Any]:
        """Run the member ``wish`` asks for (already running as asked: nothing)."""
        async with self._lock:
            if self.process is not None and self.process.pid is not None:
                if self.wish is not None and self.wish.member() == wish.member():
                    return self.status()
                raise errors.OpPrereqError(
                    f"This node runs etcd member {self.process.member.name} already; stop it first"
                )
            if not await asyncio.to_thread(self.paths.server_pem.exists):
                raise errors.OpPrereqError(
                    "This node is in no cluster (it has no node certificate): it runs no etcd"
                    " member",
                    C.ECODE_STATE,
                )
            root = etcd_root(self.paths)
            await asyncio.to_thread(root.mkdir, parents=True, exist_ok=True, mode=0o700)
            data = json.dumps(asdict(wish), sort_keys=True).encode()
            await asyncio.to_thread(atomic_write, _wish_file(self.paths), data, mode=0o600)
            await self._run(wish)
            return self.status()

    async def _run(self, wish: MemberWish) -> None:
        self.wish = wish
        self.process = EtcdMember(etcd_root(self.paths), wish.member(), wish.cluster(), self._tls())
        await self.process.start(new=wish.new)
        log.info("etcd member %s runs (pid %s)", wish.name, self.process.pid)

    async def resume(self) -> None:
        """Start the member noded ran before it stopped, if any."""
        async with self._lock:
            wish = await asyncio.to_thread(_read_wish, self.paths)
            if wish is not None:
                await self._run(wish)

    async def stop(self, *, forget: bool) -> None:
        """Stop the member (also one a killed noded left); ``forget``: and its data."""
        async with self._lock:
            process = self.process
            if process is None:
                wish = await asyncio.to_thread(_read_wish, self.paths)
                if wish is not None:
                    process = EtcdMember(
                        etcd_root(self.paths), wish.member(), wish.cluster(), self._tls()
                    )
            if process is not None:
                await process.stop()
            self.process = None
            if forget:
                self.wish = None
                await asyncio.to_thread(shutil.rmtree, etcd_root(self.paths), True)

    def status(self) -> dict[str, Any]:
        """The member's name, client URL and pid (None: it does not run)."""
        wish = self.wish
        if wish is None:
            return {"name": None, "client_url": None, "pid": None}
        pid = self.process.pid if self.process is not None else None
        return {"name": wish.name, "client_url": wish.member().client_url, "pid": pid}


_KEEPERS: dict[Path, MemberKeeper] = {}


def keeper(paths: Paths) -> MemberKeeper:
    """The member keeper of the node at ``paths``."""
    return _KEEPERS.setdefault(paths.root, MemberKeeper(paths))
