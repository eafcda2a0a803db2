"""The newest fence token a node has seen, kept on its disk (see :mod:`corral.rpc.fencing`).

noded lets a call that changes the node act only if its master's token is
not older than the newest token any such call has carried.  A newer token is
written first (atomically, synced, in ``<data dir>/fence-token``) and only
then does its call act, so a node that restarts, even after kill -9, never
takes an older master's call again.  Once it is written, the calls carrying
it cost a comparison: the file is written when the token changes, never per
call.

The log has one line per token change (and one when the token is read at
start), so that the log of a node shows each master's window: once a
token's line is written, no call with an older token is taken.  Calls let
in before it may still be running (a node does not end a deposed master's
work: its master daemon does, when its lease runs out).
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from corral import errors
from corral.fileio import atomic_write
from corral.rpc.fencing import refusal
from corral.state.ports import NO_FENCE

log = logging.getLogger(__name__)


class StaleToken(errors.GenericError):
    """A call carries a fence token older than the newest the node has seen."""


class FenceKeeper:
    """The newest fence token of one node, in memory and in ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # The token in the file (None: not read yet) and the newest any call
        # carried (at least the file's once it is read; maybe not written yet).
        self._durable: int | None = None
        self._seen = NO_FENCE
        self._lock = asyncio.Lock()

    @property
    def newest(self) -> int | None:
        """The newest token written (None: the file was not read yet)."""
        return self._durable

    async def admit(self, call: str, token: int) -> None:
        """Return once ``call`` carrying ``token`` may act (a newer token
        written first); StaleToken if the node has seen a newer one."""
        if token == self._durable and token >= self._seen:
            return  # the token in force: nothing to wait for
        self._seen = max(self._seen, token)
        if token < self._seen:
            raise self._stale(call, token)
        async with self._lock:
            if self._durable is None:
                self._durable = await asyncio.to_thread(self._load)
                self._seen = max(self._seen, self._durable)
            if token > self._durable:
                await asyncio.to_thread(self._store, token)
                previous, self._durable = self._durable, token
                log.info(
                    "Fence token %d in force (was %d), first carried by %s: calls with an"
                    " older one are refused from now on",
                    token,
                    previous,
                    call,
                )
            # A newer token may have come while this one waited or was written.
            if token < self._seen:
                raise self._stale(call, token)

    def forget(self) -> None:
        """Drop the token: the node left its cluster, or joins one (whose
        tokens have nothing to do with the last cluster's)."""
        self.path.unlink(missing_ok=True)
        self._durable, self._seen = NO_FENCE, NO_FENCE
        log.info("Fence token forgotten: a new cluster's master may call")

    def _stale(self, call: str, token: int) -> StaleToken:
        log.warning("Refused %s: fence token %d, older than %d", call, token, self._seen)
        return StaleToken(refusal(call, token, self._seen))

    def _load(self) -> int:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return NO_FENCE
        except OSError as err:
            raise errors.OpExecError(f"Cannot read the fence token in {self.path}: {err}") from None
        if not text.strip().isdigit():
            # No guess: any token taken now might be a deposed master's.
            raise errors.OpExecError(
                f"The fence token file {self.path} holds {text[:40]!r}, not a number;"
                " calls that change this node are refused until it is fixed"
            )
        token = int(text)
        log.info("Fence token %d in force (kept in %s)", token, self.path)
        return token

    def _store(self, token: int) -> None:
        atomic_write(self.path, f"{token}\n".encode("ascii"), mode=0o600)
        # The new name must be on disk too, not only the data.
        directory = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
