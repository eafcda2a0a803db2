"""noded's QMP connection to one running QEMU, and what its events say.

One connection per guest, held for as long as noded runs (QEMU's QMP socket
takes one client at a time; a restarted noded connects again).  The guest's
state follows QMP's events (STOP, RESUME, SHUTDOWN, RESET, POWERDOWN), and
the process's exit is noticed through a pidfd on the event loop: nothing
polls.  A SHUTDOWN the guest made itself (``"guest": true``, reason
``guest-shutdown``) without a POWERDOWN asked by the node is Ganeti's user
shutdown (what its ganeti-kvmd concludes from the same events).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from qemu.qmp import EventListener, QMPClient, QMPError, Runstate

from corral import errors
from corral.node.hypervisor.spec import STATE_PAUSED, STATE_RUNNING

log = logging.getLogger(__name__)

EVENTS = ("STOP", "RESUME", "SHUTDOWN", "RESET", "POWERDOWN", "BLOCK_IO_ERROR")
# Told of a BLOCK_IO_ERROR: the guest's name and the event's data.
IoErrorHandler = Callable[[str, Mapping[str, Any]], None]
# After the process is gone, how long its last messages may take to be read.
_DRAIN_TIMEOUT = 5.0


class Monitor:
    """The QMP connection to the QEMU of instance ``name`` (process ``pid``).

    ``on_exit`` is called once, on the event loop, when the process is gone
    and every event it sent has been seen.
    """

    def __init__(
        self,
        name: str,
        socket: Path,
        pid: int,
        on_exit: Callable[[Monitor], None],
        on_io_error: IoErrorHandler | None = None,
    ) -> None:
        self.name = name
        self.socket = socket
        self.pid = pid
        self.state = STATE_RUNNING
        self.resets = 0
        # Set by the node before it asks for a clean stop: the SHUTDOWN that
        # follows is not the guest's own.
        self.stopping = False
        self.powerdown_seen = False
        self.user_shutdown = False
        self.exited = asyncio.Event()
        self._on_exit = on_exit
        self._on_io_error = on_io_error
        self._client = QMPClient(name)
        self._listener = EventListener(EVENTS)
        self._events: asyncio.Task[None] | None = None
        self._pidfd: int | None = None
        self._finishing: asyncio.Task[None] | None = None
        # A file sent goes to the next getfd: one pair at a time (a migration
        # and a VNC client may hand theirs together).
        self._passing = asyncio.Lock()

    async def connect(self) -> None:
        """Connect, learn the current state, and follow events and the exit."""
        try:
            await self._client.connect(str(self.socket))
            self._client.register_listener(self._listener)
            status = await self._client.execute("query-status")
        except (QMPError, OSError) as err:
            await self._disconnect()
            raise errors.OpExecError(f"Cannot talk to the QEMU of '{self.name}': {err}") from None
        self.state = STATE_RUNNING if _running(status) else STATE_PAUSED
        self._events = asyncio.create_task(self._follow(), name=f"qmp-events-{self.name}")
        self._watch_exit()

    async def execute(self, command: str, arguments: Mapping[str, Any] | None = None) -> Any:
        """Run a QMP command; OpExecError if it fails or QEMU is gone."""
        try:
            return await self._client.execute(command, arguments)
        except (QMPError, OSError) as err:
            raise errors.OpExecError(f"QMP {command} on '{self.name}' failed: {err}") from None

    def listen(self, listener: EventListener) -> None:
        """Also hand QEMU's events to ``listener`` (a migration's own events)."""
        self._client.register_listener(listener)

    def unlisten(self, listener: EventListener) -> None:
        with contextlib.suppress(Exception):
            self._client.remove_listener(listener)

    async def send_fd(self, fd: int, name: str) -> None:
        """Give QEMU the open file ``fd`` under ``name`` (QMP getfd)."""
        async with self._passing:
            try:
                self._client.send_fd_scm(fd)
            except (QMPError, OSError) as err:
                raise errors.OpExecError(
                    f"Cannot pass a file to the QEMU of '{self.name}': {err}"
                ) from None
            await self.execute("getfd", {"fdname": name})

    async def close(self) -> None:
        """Let go of the connection; QEMU keeps running."""
        self._unwatch_exit()
        await self._stop_following()
        await self._disconnect()

    # Events
    async def _follow(self) -> None:
        async for event in self._listener:
            self._apply(event)

    def _apply(self, event: Mapping[str, Any]) -> None:
        kind = event["event"]
        data = event.get("data") or {}
        if kind == "STOP":
            self.state = STATE_PAUSED
        elif kind == "RESUME":
            self.state = STATE_RUNNING
        elif kind == "RESET":
            self.resets += 1
        elif kind == "POWERDOWN":
            self.powerdown_seen = True
        elif kind == "SHUTDOWN":
            by_guest = data.get("guest") is True and data.get("reason") == "guest-shutdown"
            self.user_shutdown = by_guest and not (self.stopping or self.powerdown_seen)
        elif kind == "BLOCK_IO_ERROR" and self._on_io_error is not None:
            self._on_io_error(self.name, data)
        log.debug("%s: QMP event %s %s", self.name, kind, data)

    # The process's exit
    def _watch_exit(self) -> None:
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except ProcessLookupError:
            asyncio.get_running_loop().call_soon(self._process_gone)
            return
        asyncio.get_running_loop().add_reader(self._pidfd, self._process_gone)

    def _unwatch_exit(self) -> None:
        if self._pidfd is not None:
            asyncio.get_running_loop().remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def _process_gone(self) -> None:
        self._unwatch_exit()
        self._finishing = asyncio.create_task(self._finish(), name=f"qmp-exit-{self.name}")

    async def _finish(self) -> None:
        # Its last events (SHUTDOWN) may still be unread: read up to the EOF.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_DRAIN_TIMEOUT):
                while self._client.runstate == Runstate.RUNNING:
                    await self._client.runstate_changed()
        await self._stop_following()
        for event in self._listener.clear():
            self._apply(event)
        await self._disconnect()
        self.exited.set()
        self._on_exit(self)

    async def _stop_following(self) -> None:
        if self._events is not None:
            self._events.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._events
            self._events = None

    async def _disconnect(self) -> None:
        # disconnect() re-raises what ended the connection (EOFError when
        # QEMU exits): the connection is closed either way.
        with contextlib.suppress(Exception):
            await self._client.disconnect()


def _running(status: Any) -> bool:
    return isinstance(status, dict) and bool(status.get("running"))
