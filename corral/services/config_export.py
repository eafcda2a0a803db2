"""masterd's ``config.data``: written after config commits and sent to the
other master candidates (:mod:`corral.services.config_data` renders it).

The SQLite store stays the truth; the file is a derived, read-only copy for
confd and Ganeti's tools.  A commit only wakes the writer (a config
listener); the writer renders in a thread and replaces the file atomically
(unsynced: masterd writes it again at its start) when its bytes changed.
A round starts once no commit came for :data:`QUIET` seconds (or
:data:`QUIET_ROUNDS` times the last round's time, if longer: a big
configuration waits for a real pause), or :data:`WRITE_INTERVAL` seconds
after the first commit it will hold, or at once for somebody waiting for
the file; unless somebody waits, the rounds take at most :data:`MAX_SHARE`
of masterd's time (rendering competes with the jobs for masterd's
interpreter; with 10,000 instances a round takes some 30 ms).  As in
Ganeti, an opcode that changed the configuration ends only once the file
holds its change (:meth:`ConfigExport.written`; Ganeti's QA reads the file
between two commands), but the opcodes that end while a round runs share
the next one: a stream of jobs costs one write per round, not one per job
(writing the file grows with the configuration, a job's commit does not).
``gnt-cluster verify`` and ``redist-conf`` wait for every pending change
(:meth:`ConfigExport.settled`).  The master's ssconf files are
:class:`corral.services.ssconf.MasterSsconf`'s.

A second task sends the newest file to the online candidates that do not
have these bytes yet, at most one round every :data:`SEND_PAUSE` seconds.
Sends happen one batch at a time under :attr:`lock`, so a node never gets
an older file after a newer one; the candidates' role changes take the same
lock (:mod:`corral.services.distribution`), so a demoted node's file is not
written again once it is removed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
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

# A round starts once no commit came for this long (seconds), or for
# QUIET_ROUNDS times the last round's time if longer...
QUIET = 0.01
QUIET_ROUNDS = 10
# ...or this long after the first commit it will hold, whichever is sooner.
WRITE_INTERVAL = 1.0
# The share of masterd's time the rounds may take, at most: a round starts no
# sooner than its predecessor's time divided by this after that one started.
MAX_SHARE = 0.1
# The shortest pause between two sends to the candidates (seconds).
SEND_PAUSE = 1.0
# After a send that some candidate did not take, the next try (seconds).
SEND_RETRY = 10.0
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
    """The exporter: a config listener, a writer task and a sender task."""

    def __init__(self, master: Master) -> None:
        self._master = master
        self._loop = asyncio.get_running_loop()
        self._dirty = asyncio.Event()
        self._to_send = asyncio.Event()
        self._writing = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._pause: asyncio.Future[None] | None = None  # between two rounds
        # Loop times: the first and the last commit the next round will hold,
        # and the start of the last round.
        self._first_commit = self._last_commit = self._last_start = 0.0
        self._took = 0.0  # the last round's time
        self._wanted = 0  # the newest cluster serial somebody waits for
        self._progress = asyncio.Condition()
        self._tasks: list[asyncio.Task[None]] = []
        self._renderer = Renderer()
        self._data: bytes | None = None  # what the master's file holds
        self._written = 0  # the cluster serial it holds
        self._sent: dict[str, bytes] = {}  # node uuid → digest of what it got
        # The candidates the last send round covered, and the rounds so far.
        self._covered: frozenset[str] = frozenset()
        self._rounds_started = self._rounds_done = 0
        self._send_now = asyncio.Event()  # somebody waits: no pause before the next round
        self.lock = asyncio.Lock()  # held while files go to (or leave) candidates

    def changed(self, cfg: ConfigManager, tables: set[str]) -> None:
        """The config listener (from any thread: a commit may run in one)."""
        self._loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        self._last_commit = self._loop.time()
        if not self._dirty.is_set():
            self._first_commit = self._last_commit
        self._dirty.set()
        self._idle.clear()
        self._run_tasks()

    def _run_tasks(self) -> None:
        if not self._tasks:
            self._tasks = [
                self._loop.create_task(self._write_rounds()),
                self._loop.create_task(self._send_rounds()),
            ]

    async def start(self) -> None:
        """Write the file as the configuration is now (at masterd's start),
        then send it to the candidates in the background."""
        image = take_image(self._master.cfg)
        await self._write(image)
        await self._advance(image.serial)
        self._idle.clear()
        self._to_send.set()
        self._run_tasks()

    async def _write_rounds(self) -> None:
        while True:
            await self._dirty.wait()
            await self._round_due()
            self._dirty.clear()
            started = self._loop.time()
            serial = self._master.cfg.serial
            self._writing = True
            try:
                await self._write(take_image(self._master.cfg, since=self._renderer.serial))
            except Exception:
                log.exception("Writing config.data failed")
            finally:
                # Even after a failure: jobs must not wait for it forever.
                await self._advance(serial)
                self._writing = False
            self._to_send.set()
            self._took = self._loop.time() - started
            self._last_start = started

    async def _round_due(self) -> None:
        """Wait until the next round may start (see the module's doc)."""
        while True:
            if self._wanted > self._written:
                return  # an opcode waits: the round is its critical path
            now = self._loop.time()
            quiet = self._last_commit + max(QUIET, QUIET_ROUNDS * self._took)
            due = max(
                self._last_start + self._took / MAX_SHARE,
                min(quiet, self._first_commit + WRITE_INTERVAL),
            )
            if due <= now:
                return
            self._pause = self._loop.create_future()
            try:
                await asyncio.wait_for(self._pause, due - now)
            except TimeoutError:
                pass  # later commits may have moved the due time: look again
            finally:
                self._pause = None

    def _want(self, serial: int) -> None:
        """Somebody waits for the file to hold ``serial``: no pause before it."""
        self._wanted = max(self._wanted, serial)
        if self._pause is not None and not self._pause.done() and serial > self._written:
            self._pause.set_result(None)

    async def _advance(self, serial: int) -> None:
        async with self._progress:
            self._written = max(self._written, serial)
            self._progress.notify_all()

    async def _send_rounds(self) -> None:
        while True:
            await self._to_send.wait()
            self._to_send.clear()
            started = self._loop.time()
            self._rounds_started += 1
            candidates = other_candidates(self._master.cfg)
            try:
                async with self.lock:
                    problems = await self.send(candidates, force=False)
            except Exception:
                log.exception("Sending config.data failed")
                problems = ["failed"]
            self._covered = frozenset(n.uuid for n in candidates)
            async with self._progress:
                self._rounds_done += 1
                self._progress.notify_all()
            if problems:
                # A candidate that was down gets it once it is back, not only
                # at the next change.
                self._loop.call_later(SEND_RETRY, self._to_send.set)
            if not (self._writing or self._dirty.is_set() or self._to_send.is_set()):
                self._idle.set()
            # A burst of changes is sent as a few files, not one per write.
            with contextlib.suppress(TimeoutError):
                pause = max(SEND_PAUSE, self._loop.time() - started)
                await asyncio.wait_for(self._send_now.wait(), pause)
            self._send_now.clear()

    async def _write(self, image: ConfigImage) -> None:
        self._data = await asyncio.to_thread(self._write_file, image)

    def _write_file(self, image: ConfigImage) -> bytes:
        """Render; replace the file if its bytes differ (in a thread)."""
        data = self._renderer.render(image)
        path = self._master.paths.config_data
        if self._data is None:  # the first time, the file left before
            with contextlib.suppress(OSError):
                self._data = path.read_bytes()
        if data != self._data:
            atomic_write(path, data, mode=MODE, durable=False)
        return data

    async def written(self, serial: int) -> None:
        """Wait until the file holds cluster serial ``serial`` (or a later one)."""
        self._want(serial)
        async with self._progress:
            await self._progress.wait_for(lambda: self._written >= serial)

    async def distributed(self) -> None:
        """If the master candidates changed since the last send round (as
        Ganeti's wconfd when they change: a new candidate has the file when
        the job that made it one ends), wait for a round that covers them
        (a candidate that fails is only logged)."""
        current = frozenset(n.uuid for n in other_candidates(self._master.cfg))
        if current == self._covered:
            return
        wanted = self._rounds_started + 1
        self._idle.clear()
        self._to_send.set()
        self._send_now.set()
        self._run_tasks()
        async with self._progress:
            await self._progress.wait_for(lambda: self._rounds_done >= wanted)

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
        """Wait until every change so far is written and sent to the
        candidates (one that missed the file gets it now, not at its next
        retry); whether it was within ``timeout`` seconds."""
        if self._tasks and self._data is not None:
            digest = hashlib.sha1(self._data).digest()
            if any(self._sent.get(n.uuid) != digest for n in other_candidates(self._master.cfg)):
                self._idle.clear()
                self._to_send.set()
        self._want(self._master.cfg.serial)
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def stop(self) -> None:
        """Stop the background tasks (at masterd's shutdown)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
