"""A standing-by master candidate's configuration, kept warm.

A candidate's masterd that stands by (:mod:`corral.master.standby`) loads
the configuration once and then follows the store's change log, so that
when it takes the mastership over it only applies the few changes it has
not seen yet instead of loading and checking every object again.  Should
the store no longer keep the changes it needs (it stood by cut off for
long), it loads the whole configuration again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from corral import errors
from corral.config.manager import ConfigManager
from corral.state.ports import ChangesExpired, ConfigStore

log = logging.getLogger(__name__)

# Seconds one wait for the next change lasts (then it asks again).
FOLLOW_WAIT = 30.0
# Seconds before a store that did not answer is asked again.
STORE_RETRY = 1.0


class ConfigFollower:
    """The configuration of ``store``, followed until :meth:`take`."""

    def __init__(self, store: ConfigStore) -> None:
        self._store = store
        self._cfg: ConfigManager | None = None
        self._task: asyncio.Task[None] | None = None
        self.followed = 0  # changes applied since the last load

    @property
    def serial(self) -> int | None:
        """The serial followed so far (None: not loaded yet)."""
        return self._cfg.serial if self._cfg is not None else None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="config follower")

    async def _run(self) -> None:
        while True:
            try:
                await self._step(FOLLOW_WAIT)
            except errors.GenericError as err:  # the store does not answer now
                log.warning("Cannot follow the configuration (trying again): %s", err.message)
                await asyncio.sleep(STORE_RETRY)

    async def _step(self, wait: float) -> None:
        """Load the configuration, or apply the changes after it (waiting up
        to ``wait`` seconds for one)."""
        if self._cfg is None:
            self._cfg, self.followed = await ConfigManager.open(self._store), 0
            log.info("Following the configuration from serial %d", self._cfg.serial)
            return
        try:
            found = await self._store.changes(self._cfg.serial, wait)
        except ChangesExpired as err:
            log.info("%s", err.message)
            self._cfg = None
            return
        for change in found:
            self._cfg.follow(change)
        self.followed += len(found)

    async def stop(self) -> None:
        """Stop following."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def take(self) -> ConfigManager:
        """The configuration, caught up with the store, for a new master
        (the following stops)."""
        followed = self._task is not None
        await self.stop()
        if self._cfg is not None:
            await self._step(0.0)  # what came since the last look
        if self._cfg is None:  # never loaded, or the changes it needs are gone
            await self._step(0.0)
        assert self._cfg is not None
        if followed:
            log.info(
                "Took the configuration over warm at serial %d (%d changes followed)",
                self._cfg.serial,
                self.followed,
            )
        return self._cfg
