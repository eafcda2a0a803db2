"""masterd's etcd membership service: the members follow the master candidates.

While the cluster's ``etcd_members`` setting is on (Corral's own, off by
default: ``gnt-cluster modify --etcd-members=yes``), every online master
candidate runs an etcd member and the master keeps the membership in line
with the candidates (:class:`corral.services.etcd_reconciler.MemberReconciler`).
A config listener wakes the service after any change of the nodes or of the
cluster (candidate flags, nodes added or removed, offline, drained, the
switch itself); one background task then makes one change at a time until
nothing is left, so no job ever waits for etcd.  A failed step is tried
again after a pause that doubles up to :data:`RETRY_MAX`; a settled service
looks again every ``check_interval`` seconds (masterd's
``--etcd-check-interval``), which starts members whose process is gone.

Turned off, the service stops and forgets every node's member; a cluster
that never turned it on runs no etcd and the service asks no node anything.
Where the master's stores live in etcd, they move back into SQLite first
(``corral.services.store_move_back``), as they do whenever the candidates
become too few for etcd: before any member is removed, so that they are read
while etcd has its voters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from corral import constants as C
from corral import errors
from corral.objects import Cluster, Node
from corral.rpc.calls_etcd import etcd_member_status, etcd_member_stop
from corral.services.candidate_files import CandidateFiles
from corral.services.etcd_reconciler import MemberReconciler
from corral.services.store_move import VOTERS_TO_MOVE, move_to_etcd
from corral.services.store_move_back import move_to_sqlite
from corral.state import home
from corral.state.etcd.client import EtcdClient, client_ssl_context
from corral.state.etcd.members import Candidate, Change, list_members

if TYPE_CHECKING:
    from corral.config.manager import ConfigManager
    from corral.services.context import Master

log = logging.getLogger(__name__)

# Seconds an etcd call keeps trying the members: a step that cannot reach
# them ends soon and is tried again, it does not hold the service.
ETCD_DEADLINE = 3.0
# Pauses after a step that waits for etcd, and after a failed step (seconds):
# the first, doubled each time up to the last.
PAUSE_FIRST, PAUSE_MAX = 0.2, 5.0
RETRY_FIRST, RETRY_MAX = 1.0, 60.0
# The tables whose changes may change who runs a member.
_TABLES = frozenset({Node.TABLE, Cluster.TABLE})
# What the configuration asks of the members: the switch, the candidates, the others.
Plan = tuple[bool, list[Candidate], list[Candidate]]


def member_nodes(cfg: ConfigManager) -> tuple[list[Candidate], list[Candidate]]:
    """The nodes that run a member (the online master candidates: the master
    first, the others by name) and the other online nodes."""
    master = cfg.cluster.master_node
    online = sorted(
        (n for n in cfg.nodes() if not n.offline), key=lambda n: (n.uuid != master, n.name)
    )
    chosen = [Candidate(n.name, n.uuid, n.primary_ip) for n in online if n.master_candidate]
    others = [Candidate(n.name, n.uuid, n.primary_ip) for n in online if not n.master_candidate]
    return chosen, others


class EtcdMembers:
    """The service: a config listener and one task."""

    def __init__(
        self, master: Master, check_interval: float = C.DEFAULT_ETCD_CHECK_INTERVAL
    ) -> None:
        self._master = master
        self._check_interval = check_interval
        self._loop = asyncio.get_running_loop()
        self._dirty = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._etcd: EtcdClient | None = None
        self._reconciler: MemberReconciler | None = None
        # Whether members may run that the switch being off must stop.
        self._teardown_due = False
        # What the members were last found settled for, and what the last
        # step failed for (see _plan): a change that asks nothing new does
        # not wake the service before it is due.
        self._settled_for: Plan | None = None
        self._failed_for: Plan | None = None
        self._files = CandidateFiles()
        # The last failed step's error (None once a step succeeds), for verify.
        self.last_failure: str | None = None
        # Why the last move of the stores back into SQLite failed (None: it did not).
        self.move_back_failure: str | None = None

    def changed(self, cfg: ConfigManager, tables: set[str]) -> None:
        """The config listener (from any thread: a commit may run in one)."""
        if _TABLES & tables:
            self._loop.call_soon_threadsafe(self._dirty.set)

    def start(self) -> None:
        """Start the task: its first step looks at the members at once."""
        self._dirty.set()
        self._task = self._loop.create_task(self._run())

    async def stop(self) -> None:
        """Stop the task (at masterd's shutdown); the members run on."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._etcd is not None:
            await self._etcd.close()

    def _plan(self) -> Plan:
        """What the configuration asks of the members now."""
        cfg = self._master.cfg
        return cfg.cluster.etcd_members, *member_nodes(cfg)

    async def _wait(self, due: float | None) -> bool:
        """Until ``due`` (a loop time; None: no limit) or a change of the
        configuration; whether one came."""
        timeout = None if due is None else due - self._loop.time()
        if timeout is None or timeout > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._dirty.wait()
        woke = self._dirty.is_set()
        self._dirty.clear()
        return woke

    async def _run(self) -> None:
        """Step when due (None: at the next change only), or when the
        configuration asks for something new."""
        pause, retry = PAUSE_FIRST, RETRY_FIRST
        due: float | None = self._loop.time()
        while True:
            if await self._wait(due):
                if self._plan() in (self._settled_for, self._failed_for):
                    continue  # a change of nodes or cluster that asks nothing new
                pause, retry = PAUSE_FIRST, RETRY_FIRST  # no backing off from an old wish
            # What this step works for: a change made while it runs is new.
            plan = self._plan()
            self._settled_for = None
            try:
                change = await self._step()
            except Exception as err:  # a failed step is tried again: never end the task
                text = err.message if isinstance(err, errors.GenericError) else repr(err)
                log.warning("etcd membership step failed (next try in %g s): %s", retry, text)
                log.debug("etcd membership step failure", exc_info=True)
                self.last_failure = text
                self._failed_for = plan
                due, retry = self._loop.time() + retry, min(retry * 2, RETRY_MAX)
                continue
            self.last_failure = self._failed_for = None
            if change is None:
                self._settled_for = plan
                on = self._master.cfg.cluster.etcd_members
                due = self._loop.time() + self._check_interval if on else None
                continue
            log.info("etcd membership: %s", change.text)
            retry = RETRY_FIRST
            if change.pause:
                due, pause = self._loop.time() + pause, min(pause * 2, PAUSE_MAX)
            else:
                due, pause = self._loop.time(), PAUSE_FIRST

    async def _step(self) -> Change | None:
        """One step towards what the configuration asks for now."""
        cfg = self._master.cfg
        on = cfg.cluster.etcd_members
        candidates, others = member_nodes(cfg)
        backend = self._master.backend
        in_etcd = backend is not None and backend.client is not None
        if in_etcd and (not on or len(candidates) < VOTERS_TO_MOVE):
            # Before the members shrink: etcd still has its voters to read from.
            return await self._move_back()
        self.move_back_failure = None  # none is wanted: an old failure says nothing now
        if not on:
            await self._tell_candidates(candidates, others)
            return await self._teardown() if self._teardown_due else None
        self._teardown_due = True
        if not candidates:
            return None
        endpoints = [c.client_url for c in candidates]
        if self._etcd is None or self._reconciler is None:
            paths = self._master.paths
            tls = await asyncio.to_thread(client_ssl_context, paths.ca_cert, paths.client_pem)
            self._etcd = EtcdClient(endpoints, tls, ETCD_DEADLINE)
            self._reconciler = MemberReconciler(self._master.rpc, self._etcd, candidates, others)
        else:
            self._etcd.set_endpoints(endpoints)
            self._reconciler.retarget(candidates, others)
        return (
            await self._reconciler.step()
            or await self._stores_follow()
            or await self._files_follow(candidates, others)
        )

    async def _stores_follow(self) -> Change | None:
        """With the members settled: the master's stores move into etcd once it
        has enough voters; once there, their client calls the voters."""
        master, backend = self._master, self._master.backend
        if backend is None or self._etcd is None:
            return None
        voters = [m for m in await list_members(self._etcd) if not m.learner]
        endpoints = sorted(url for m in voters for url in m.client_urls)
        if backend.client is None:
            if len(voters) < VOTERS_TO_MOVE or len(self._plan()[1]) < VOTERS_TO_MOVE:
                return None
            tls = await asyncio.to_thread(
                client_ssl_context, master.paths.ca_cert, master.paths.client_pem
            )
            where = await move_to_etcd(master, EtcdClient(endpoints, tls))
            return Change(
                f"moved the master's stores into etcd ({where.prefix},"
                f" config serial {where.moved_at_serial})"
            )
        if not endpoints or endpoints == sorted(backend.client.endpoints):
            return None
        paths = master.paths
        recorded = await asyncio.to_thread(home.read, paths.store_home)
        if isinstance(recorded, home.EtcdHome):
            await asyncio.to_thread(
                home.write, paths.store_home, replace(recorded, endpoints=tuple(endpoints))
            )
        backend.client.set_endpoints(endpoints)
        return Change(f"the master's stores are read and written through {', '.join(endpoints)}")

    async def _move_back(self) -> Change:
        """The stores move back into SQLite (a failure is kept for
        ``gnt-cluster modify --etcd-members=no`` to show)."""
        try:
            where = await move_to_sqlite(self._master)
        except Exception as err:
            text = err.message if isinstance(err, errors.GenericError) else repr(err)
            self.move_back_failure = text
            raise
        self.move_back_failure = None
        return Change(
            f"moved the master's stores back into SQLite (config serial {where.moved_at_serial})"
        )

    async def _tell_candidates(self, candidates: list[Candidate], others: list[Candidate]) -> None:
        """The switch is off: tell the candidates where the stores live now, as
        far as they answer (the members stop all the same)."""
        try:
            await self._files_follow(candidates, others)
        except errors.GenericError as err:
            log.warning("Cannot tell every master candidate where the stores live: %s", err.message)

    async def _files_follow(
        self, candidates: list[Candidate], others: list[Candidate]
    ) -> Change | None:
        done = await self._files.follow(self._master, candidates, others)
        return None if done is None else Change(done)

    async def _teardown(self) -> Change | None:
        """The switch went off: stop every online node's member, forget its data."""
        rpc = self._master.rpc
        nodes = [n for n in self._master.cfg.nodes() if not n.offline]
        runs = await rpc.results(nodes, etcd_member_status())
        silent = [n.name for n in nodes if runs[n.uuid].failed]
        running = [n for n in nodes if (runs[n.uuid].value or {}).get("name") is not None]
        for node in running:
            await rpc.run(node, etcd_member_stop(True), f"Stopping the etcd member on {node.name}")
        if silent:
            raise errors.OpExecError(f"Cannot ask {', '.join(silent)} to stop their etcd member")
        self._teardown_due = False
        if self._etcd is not None:
            await self._etcd.close()
        self._etcd = self._reconciler = None
        if not running:
            return None
        return Change(f"stopped the etcd members on {', '.join(n.name for n in running)}")
