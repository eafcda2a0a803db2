"""Logical units for testing: delays and job-queue exercises.

Both speak Ganeti's test protocol: the opcode logs the path of a fresh unix
socket, waits for a client to connect, then for it to send a byte or close.
"""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
import time
from collections.abc import Callable
from typing import Any

from corral import constants as C
from corral import errors
from corral.cmdlib.base import LogicalUnit
from corral.objects import Node
from corral.opcodes import test as opt
from corral.rpc.calls_node import test_delay
from corral.rpc.result import NodeAddress


async def _accept_one(announce: Callable[[str], None], timeout: float) -> socket.socket | None:
    """The first connection to a fresh unix socket within ``timeout`` (else None);
    ``announce`` is given the socket's path once it listens.  The socket and its
    directory are gone when this returns."""
    loop = asyncio.get_running_loop()
    with tempfile.TemporaryDirectory(prefix="corral-test-") as tmp:
        path = os.path.join(tmp, "sock")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(path)
            listener.listen(1)
            listener.setblocking(False)
            announce(path)
            try:
                conn, _ = await asyncio.wait_for(loop.sock_accept(listener), timeout)
            except TimeoutError:
                return None
    return conn


async def _confirmed(conn: socket.socket, timeout: float) -> bool:
    """Whether the client sent a byte or closed ``conn`` within ``timeout``."""
    with conn:
        try:
            await asyncio.wait_for(asyncio.get_running_loop().sock_recv(conn, 1), timeout)
        except TimeoutError:
            return False
    return True


class LUTestDelay(LogicalUnit[opt.OpTestDelay]):
    """Sleeps on the master and/or the given nodes, ``repeat`` times.

    Interruptible (on the master only, as Ganeti's): the delay ends early once
    a client connects to the socket logged as a ``delay-test`` entry and then
    closes the connection; the repetitions end with it.
    """

    OPCODE = opt.OpTestDelay
    REQ_BGL = False

    def expand_names(self) -> None:
        uuids = self.op.on_node_uuids
        if uuids is None:
            uuids = [self.expand(Node, n).uuid for n in self.op.on_nodes]
        master = self.cfg.cluster.master_node
        if self.op.on_master and master not in uuids:
            uuids = [*uuids, master]
        self.op.on_node_uuids = uuids

    def declare_locks(self) -> None:
        # As Ganeti 3.0.2's: the nodes it delays on are locked, the master
        # included, whatever no_locks says (its LUTestDelay overrides it).
        if self.op.on_node_uuids:
            self.needed_locks[C.LEVEL_NODE] = list(self.op.on_node_uuids)

    async def _delay_once(self) -> bool:
        """One delay (on the nodes, else on the master); whether it was interrupted."""
        if self.op.interruptible:
            return await self._interruptible_delay()
        if self.op.on_node_uuids:
            await self._remote_delay(self.node_addresses(self.op.on_node_uuids))
        else:
            await asyncio.sleep(self.op.duration)
        return False

    async def _remote_delay(self, targets: list[NodeAddress]) -> None:
        results = await self.master.rpc.results(targets, test_delay(self.op.duration))
        for res in results.values():
            res.get("Failed to delay on node")

    async def _interruptible_delay(self) -> bool:
        start = time.monotonic()
        conn = await _accept_one(
            lambda path: self.ctx.feedback([path], C.ELOG_DELAY_TEST), self.op.duration
        )
        if conn is None:
            return False
        remaining = self.op.duration - (time.monotonic() - start)
        self.feedback(f"Received connection, time to go is {int(remaining)}")
        if not await _confirmed(conn, max(remaining, 0)):
            return False
        self.feedback(f"Interrupted, time spent waiting: {int(time.monotonic() - start)}")
        return True

    async def exec(self) -> Any:
        for i in range(max(self.op.repeat, 1)):
            if self.op.repeat:
                self.log_info(f"Test delay iteration {i}/{self.op.repeat - 1}")
            if await self._delay_once():
                break
        return None


class LUTestJqueue(LogicalUnit[opt.OpTestJqueue]):
    """Reports through every job-queue channel, then succeeds or fails.

    Each notification is a ``jqueue-test`` log entry naming a test socket; the
    opcode waits for the client (``gnt-debug test-jobqueue``) to connect and
    close, so the client can check the job's state at that very point.
    """

    OPCODE = opt.OpTestJqueue
    REQ_BGL = False
    # Below WaitForJobChange's default timeout, as Ganeti's.
    CONNECT_TIMEOUT = 20.0
    CONFIRM_TIMEOUT = 60.0

    async def before_locks(self) -> None:
        if self.op.notify_waitlock:
            await self._notify(errors.OpPrereqError, C.JQT_EXPANDNAMES, None)
        self.log_info("Expanding names")

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_NODE] = [self.cfg.cluster.master_node]

    async def exec(self) -> Any:
        if self.op.notify_exec:
            await self._notify(errors.OpExecError, C.JQT_EXEC, None)
        self.log_info("Executing")
        if self.op.log_messages:
            await self._notify(errors.OpExecError, C.JQT_STARTMSG, len(self.op.log_messages))
            for index, message in enumerate(self.op.log_messages, start=1):
                self.log_info(f"Sending log message {index}")
                self.feedback(C.JQT_MSGPREFIX + message)
                await self._notify(errors.OpExecError, C.JQT_LOGMSG, index)
        if self.op.fail:
            raise errors.OpExecError("Opcode failure was requested")
        return True

    async def _notify(self, error: type[errors.GenericError], test: str, arg: Any) -> None:
        """Announce ``test``; wait for the client to connect, then to close."""
        conn = await _accept_one(
            lambda path: self.ctx.feedback([path, test, arg], C.ELOG_JQUEUE_TEST),
            self.CONNECT_TIMEOUT,
        )
        if conn is None:
            raise error("Client didn't connect in time (timed out)")
        if not await _confirmed(conn, self.CONFIRM_TIMEOUT):
            raise error("Client failed to confirm notification (timed out)")


class LUTestOsParams(LogicalUnit[opt.OpTestOsParams]):
    """Shows the secret OS parameters it got, as Ganeti's; the job log scrubs
    their values, as everything it shows (secret values never reach the disk)."""

    OPCODE = opt.OpTestOsParams
    REQ_BGL = False

    async def exec(self) -> None:
        if not self.op.osparams_secret:
            raise errors.OpExecError("Opcode needs secret parameters")
        self.feedback(f"Secret OS parameters: {self.op.osparams_secret}")
