"""masterd's ``config.data``: written after config commits and sent to the
other master candidates (:mod:`corral.services.config_data` renders it).

The SQLite store stays the truth; the file is a derived, read-only copy for
confd and Ganeti's tools.  A commit only wakes the exporter (a config
listener); the exporter waits :data:`COALESCE` seconds so a burst of commits
costs one write, renders in a thread, replaces the file atomically when its
bytes changed, then sends it to the online candidates that do not have
these bytes yet.  Sends happen one batch at a time under :attr:`lock`, so a
node never gets an older file after a newer one; the candidates' role
changes take the same lock (:mod:`corral.services.distribution`), so a
demoted node's file is not written again once it is removed.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
from typing import TYPE_CHECKING

from corral.fileio import atomic_write
from corral.objects import Node
from corral.rpc.calls_node import upload_file
from corral.services.config_data import ConfigImage, Renderer, take_image

if TYPE_CHECKING:
    from corral.config.manager import ConfigManager
    from corral.paths import Paths
    from corral.rpc.result import RpcResult
    from corral.services.context import Master

log = logging.getLogger(__name__)

# Seconds a change waits for the commits that follow it (one write for all).
COALESCE = 0.05
# Ganeti's mode of config.data (no other user reads it on Corral's nodes).
MODE = 0o640
# How long verify and redist-conf wait for a pending export.
SETTLE_TIMEOUT = 60.0


def ensure_confd_hmac_key(paths: Paths) -> None:
    """Make confd's key if the cluster has none (one made before Corral had
    confd; ``redist-conf`` then sends it to the nodes)."""
    if not paths.confd_hmac_key.exists():
        from corral.crypto.certs import make_confd_hmac_key, write_pem

        log.info("No %s: making one", paths.confd_hmac_key)
        write_pem(paths.confd_hmac_key, make_confd_hmac_key())


def other_candidates(cfg: ConfigManager) -> list[Node]:
    """The online master candidates other than the master: they keep a copy."""
    master = cfg.cluster.master_node
    return [n for n in cfg.nodes() if n.master_candidate and not n.offline and n.uuid != master]


class ConfigExport:
    """The exporter: a config listener plus one background task."""

    def __init__(self, master: Master) -> None:
        self._master = master
        self._loop = asyncio.get_running_loop()
        self._dirty = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._renderer = Renderer()
        self._data: bytes | None = None  # what the master's file holds
        self._sent: dict[str, bytes] = {}  # node uuid → digest of what it got
        self.lock = asyncio.Lock()  # held while files go to (or leave) candidates

    def changed(self, cfg: ConfigManager, tables: set[str]) -> None:
        """The config listener (from any thread: a commit may run in one)."""
        self._loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        self._dirty.set()
        self._idle.clear()
        if self._task is None:
            self._task = self._loop.create_task(self._run())

    async def start(self) -> None:
        """Write the file as the configuration is now (at masterd's start),
        then send it to the candidates in the background."""
        await self._write(take_image(self._master.cfg))
        self._wake()

    async def _run(self) -> None:
        while True:
            await self._dirty.wait()
            await asyncio.sleep(COALESCE)
            self._dirty.clear()
            try:
                await self._export()
            except Exception:
                log.exception("Exporting config.data failed")
            if not self._dirty.is_set():
                self._idle.set()

    async def _export(self) -> None:
        await self._write(take_image(self._master.cfg))
        async with self.lock:
            await self.send(other_candidates(self._master.cfg), force=False)

    async def _write(self, image: ConfigImage) -> None:
        self._data = await asyncio.to_thread(self._write_file, image)

    def _write_file(self, image: ConfigImage) -> bytes:
        """Render; replace the file if its bytes differ (in a thread)."""
        data = self._renderer.render(image)
        path = self._master.paths.config_data
        if data != self._data:
            try:
                same = path.read_bytes() == data
            except OSError:
                same = False
            if not same:
                atomic_write(path, data, mode=MODE)
        return data

    async def send(self, nodes: list[Node], *, force: bool) -> list[str]:
        """Send the file to ``nodes`` (with :attr:`lock` held); unless
        ``force``, only to those that do not have these bytes.  The failures."""
        data = self._data
        if data is None or not nodes:
            return []
        digest = hashlib.sha1(data).digest()
        targets = [n for n in nodes if force or self._sent.get(n.uuid) != digest]
        if not targets:
            return []
        paths = self._master.paths
        wire = paths.to_wire(paths.config_data)
        encoded = base64.b64encode(data).decode("ascii")
        request = upload_file(wire, encoded, MODE, None, None, None, None)
        results: dict[str, RpcResult[None]] = await self._master.rpc.results(targets, request)
        problems: list[str] = []
        for node in targets:
            if results[node.uuid].report(problems.append, f"Copy of {wire} to {node.name} failed"):
                self._sent[node.uuid] = digest
            else:
                self._sent.pop(node.uuid, None)
        for text in problems:
            log.warning("%s", text)
        return problems

    def forget(self, nodes: list[Node]) -> None:
        """``nodes`` lost their copy (demoted): a later send gives them one again."""
        for node in nodes:
            self._sent.pop(node.uuid, None)

    async def settled(self, timeout: float = SETTLE_TIMEOUT) -> bool:
        """Wait until every change so far is written and sent; whether it was
        within ``timeout`` seconds."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def stop(self) -> None:
        """Stop the background task (at masterd's shutdown)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
