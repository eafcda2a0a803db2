"""The etcd member a master candidate's noded runs (:mod:`corral.state.etcd.server`).

The master asks a node to run a member (its name, ports and the cluster it
forms or joins); noded keeps that wish in ``etcd/member.json`` under the
node's data directory, beside the member's data, and runs the member while
noded runs: a member whose process ends (a crash, kill -9) is started again
by noded, and a noded that starts again (after a crash, a reboot) starts its
member again; it rejoins with its data.  No master is needed for either: the
candidates' members recover while the master is down.  The
member listens on the node's primary IP only, with the node's certificate
for both its peers and its clients (mutual TLS under the cluster CA).
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from corral import constants as C
from corral import errors
from corral.fileio import atomic_write
from corral.paths import Paths
from corral.state.etcd.client import EtcdClient, client_ssl_context
from corral.state.etcd.server import EtcdMember, Member, Tls

log = logging.getLogger(__name__)

# Seconds before a member whose process ended is started again: the first
# pause, doubled after each attempt up to the last (reached once it ran that long).
RESTART_FIRST, RESTART_MAX = 0.5, 60.0


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


def read_wish(paths: Paths) -> MemberWish | None:
    """The member noded runs on the node at ``paths`` (None: none); blocking."""
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
        self._supervisors: set[asyncio.Task[None]] = set()

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
            await self._keep(wish)
            await self._run(wish)
            return self.status()

    async def force_new(self) -> dict[str, Any]:
        """Start the member again as the only member of its cluster, with its
        own copy of the data (``master-failover --no-voting``); once it serves."""
        async with self._lock:
            wish = self.wish or await asyncio.to_thread(read_wish, self.paths)
            if wish is None:
                raise errors.OpPrereqError(
                    "This node runs no etcd member: it holds no copy of the cluster's stores",
                    C.ECODE_STATE,
                )
            if not await asyncio.to_thread((etcd_root(self.paths) / "data" / "member").is_dir):
                raise errors.OpPrereqError(
                    f"etcd member {wish.name} has no data yet: it holds no copy of the"
                    " cluster's stores",
                    C.ECODE_STATE,
                )
            former = self.process or EtcdMember(
                etcd_root(self.paths), wish.member(), wish.cluster(), self._tls()
            )
            self.process = None  # its supervisor lets it go
            await former.stop()
            alone = replace(wish, initial_cluster={wish.name: wish.member().peer_url}, new=False)
            await self._keep(alone)
            await self._run(alone, force_new=True)
            assert self.process is not None
            tls = self._tls()
            client = EtcdClient([wish.member().client_url], client_ssl_context(tls.ca, tls.cert))
            try:
                await self.process.wait_serving(client)
            finally:
                await client.close()
            log.warning("etcd member %s is now the only member of its cluster", wish.name)
            return self.status()

    async def _keep(self, wish: MemberWish) -> None:
        """Record ``wish`` (noded started again runs the member it says)."""
        data = json.dumps(asdict(wish), sort_keys=True).encode()
        await asyncio.to_thread(atomic_write, _wish_file(self.paths), data, mode=0o600)

    async def _run(self, wish: MemberWish, *, force_new: bool = False) -> None:
        self.wish = wish
        process = EtcdMember(etcd_root(self.paths), wish.member(), wish.cluster(), self._tls())
        self.process = process
        await process.start(new=wish.new, force_new=force_new)
        log.info("etcd member %s runs (pid %s)", wish.name, process.pid)
        task = asyncio.get_running_loop().create_task(self._supervise(process))
        self._supervisors.add(task)
        task.add_done_callback(self._supervisors.discard)

    async def _supervise(self, process: EtcdMember) -> None:
        """Start the member again whenever its process ends (a crash, kill -9,
        the OOM killer) while it should run; pauses between attempts double
        up to RESTART_MAX, and start over once it ran that long."""
        pause = RESTART_FIRST
        while True:
            started = time.monotonic()
            status = await process.exited()
            if time.monotonic() - started >= RESTART_MAX:
                pause = RESTART_FIRST
            async with self._lock:
                if self.process is not process:
                    return  # stopped (or replaced) on purpose
            log.warning(
                "etcd member %s exited (status %s); starting it again in %g s",
                process.member.name,
                status,
                pause,
            )
            await asyncio.sleep(pause)
            pause = min(pause * 2, RESTART_MAX)
            async with self._lock:
                if self.process is not process:
                    return
                try:
                    await process.start(new=False)  # it rejoins with its data
                    log.info("etcd member %s runs again (pid %s)", process.member.name, process.pid)
                except (errors.GenericError, OSError) as err:
                    log.error("Cannot start etcd member %s: %s", process.member.name, err)

    async def resume(self) -> None:
        """Start the member noded ran before it stopped, if any."""
        async with self._lock:
            wish = await asyncio.to_thread(read_wish, self.paths)
            if wish is not None:
                await self._run(wish)

    async def stop(self, *, forget: bool) -> None:
        """Stop the member (also one a killed noded left); ``forget``: and its data."""
        async with self._lock:
            process = self.process
            if process is None:
                wish = await asyncio.to_thread(read_wish, self.paths)
                if wish is not None:
                    process = EtcdMember(
                        etcd_root(self.paths), wish.member(), wish.cluster(), self._tls()
                    )
            if process is not None:
                await process.stop()
            self.process = None
            supervisors = list(self._supervisors)
            for task in supervisors:  # stopped on purpose: nobody starts it again
                task.cancel()
            if forget:
                self.wish = None
                await asyncio.to_thread(shutil.rmtree, etcd_root(self.paths), True)
        await asyncio.gather(*supervisors, return_exceptions=True)

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
