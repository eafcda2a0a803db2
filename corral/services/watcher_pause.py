"""The watcher's pause sent to every node (Ganeti's ``set_watcher_pause``
call), in the background: a node's watcher keeps it for when it cannot ask
masterd.

``SetWatcherPause`` answers once the pause is committed (masterd's durable
state is the truth); the nodes get it after, so that a node that is down or
partitioned does not hold the caller up to a node call's time-out.  Only
the newest pause is sent: one sender, which sends again if the pause
changed while it was sending, so a node never keeps an older one.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from corral.rpc import calls_membership

if TYPE_CHECKING:
    from corral.services.context import Master

log = logging.getLogger(__name__)


class PauseSender:
    """Sends the newest pause to the online nodes, one round at a time."""

    def __init__(self, master: Master) -> None:
        self._master = master
        self._wanted: tuple[float | None] | None = None  # None: nothing to send
        self._task: asyncio.Task[None] | None = None

    def send(self, until: float | None) -> None:
        """Send ``until`` (None: no pause) to every online node, soon."""
        self._wanted = (until,)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._rounds())

    async def _rounds(self) -> None:
        while self._wanted is not None:
            (until,), self._wanted = self._wanted, None
            nodes = [n for n in self._master.cfg.nodes() if not n.offline]
            call = calls_membership.set_watcher_pause(until)
            try:
                results = await self._master.rpc.results(nodes, call)
            except Exception:
                log.exception("Sending the watcher's pause to the nodes failed")
                continue
            for node in nodes:
                results[node.uuid].report(
                    log.warning, f"Cannot tell node {node.name} about the watcher's pause"
                )
