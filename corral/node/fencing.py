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
work: its master daemon does, when its lease runs out).  When a token goes
out of force (a newer one comes, the node leaves, noded stops), one more
line gives the times, on the machine's clock, of the first and the last
call it let in with that token (:data:`WINDOW_LINE`): what the fault tests
check across nodes (tests/helpers/fence_windows.py), at the cost of a
clock read per call, never a line per call.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from corral import errors
from corral.fileio import atomic_write
from corral.rpc.fencing import late, refusal
from corral.state.ports import NO_FENCE

log = logging.getLogger(__name__)

# The line that closes a token's window, and that of a call that came after
# its master's lease ended (parsed by tests/helpers/fence_windows.py).
WINDOW_LINE = "Fence token %d window: %d calls let in from %.6f to %.6f"
LATE_LINE = "Refused %s: fence token %d, its lease ended %.3f s before the call came"


@dataclass
class _Window:
    """The calls one token let in on this node: how many, first and last (epoch s)."""

    token: int
    first: float
    last: float
    calls: int = 1


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
        self._window: _Window | None = None

    @property
    def newest(self) -> int | None:
        """The newest token written (None: the file was not read yet)."""
        return self._durable

    async def admit(self, call: str, token: int, until: float | None = None) -> None:
        """Return once ``call`` carrying ``token`` may act (a newer token
        written first); StaleToken if the node has seen a newer one, or if
        the call came after ``until``, the end of its master's lease."""
        if until is not None and (now := time.time()) >= until:
            log.warning(LATE_LINE, call, token, now - until)
            raise StaleToken(late(call, token, until, now))
        if token == self._durable and token >= self._seen:
            self._let_in(token)  # the token in force: nothing to wait for
            return
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
                self.close_window()
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
            self._let_in(token)

    def _let_in(self, token: int) -> None:
        now = time.time()
        window = self._window
        if window is not None and window.token == token:
            window.last = now
            window.calls += 1
        else:
            self.close_window()
            self._window = _Window(token, now, now)

    def close_window(self) -> None:
        """Log the window of the token in force, if it let any call in (noded
        stops, or the token goes out of force)."""
        window, self._window = self._window, None
        if window is not None:
            log.info(WINDOW_LINE, window.token, window.calls, window.first, window.last)

    def forget(self) -> None:
        """Drop the token: the node left its cluster, or joins one (whose
        tokens have nothing to do with the last cluster's)."""
        self.path.unlink(missing_ok=True)
        self.close_window()
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
