"""Logical units for testing: delays and job-queue exercises."""

from __future__ import annotations

import asyncio
from typing import Any

from corral import constants as C
from corral import errors
from corral.cmdlib.base import LogicalUnit
from corral.objects import Node
from corral.opcodes import test as opt


class LUTestDelay(LogicalUnit[opt.OpTestDelay]):
    """Sleeps on the master and/or the given nodes, ``repeat`` times."""

    OPCODE = opt.OpTestDelay
    REQ_BGL = False

    def expand_names(self) -> None:
        if self.op.on_node_uuids is None and self.op.on_nodes:
            self.op.on_node_uuids = [self.cfg.lookup(Node, n).uuid for n in self.op.on_nodes]

    def declare_locks(self) -> None:
        if self.op.on_node_uuids and not self.op.no_locks:
            self.needed_locks[C.LEVEL_NODE] = list(self.op.on_node_uuids)

    async def _delay_once(self) -> None:
        calls = []
        if self.op.on_master:
            calls.append(asyncio.sleep(self.op.duration))
        if self.op.on_node_uuids:
            targets = self.node_addresses(self.op.on_node_uuids)
            calls.append(self._remote_delay(targets))
        await asyncio.gather(*calls)

    async def _remote_delay(self, targets: list[tuple[str, str]]) -> None:
        results = await self.master.rpc.call(targets, "test_delay", [self.op.duration])
        for res in results.values():
            res.raise_if_failed("Failed to delay on node")

    async def exec(self) -> Any:
        for i in range(max(self.op.repeat, 1)):
            if self.op.repeat:
                self.feedback(f"Test delay iteration {i}/{self.op.repeat - 1}")
            await self._delay_once()
        return None


class LUTestJqueue(LogicalUnit[opt.OpTestJqueue]):
    """Reports through every job-queue channel, then succeeds or fails.

    Ganeti's version also waits for the test client on a unix socket after each
    notification; ours only logs the ``jqueue-test`` entries, so any client that
    watches the job sees them in order.
    """

    OPCODE = opt.OpTestJqueue
    REQ_BGL = False

    def _notify(self, test: str, arg: Any = None) -> None:
        self.ctx.feedback([None, test, arg], C.ELOG_JQUEUE_TEST)

    def expand_names(self) -> None:
        if self.op.notify_waitlock:
            self._notify("expandnames")
        self.feedback("Expanding names")

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_NODE] = [self.cfg.cluster.master_node]

    async def exec(self) -> Any:
        if self.op.notify_exec:
            self._notify("exec")
        self.feedback("Executing")
        if self.op.log_messages:
            self._notify("startmsg", len(self.op.log_messages))
            for index, message in enumerate(self.op.log_messages, start=1):
                self.feedback(f"Sending log message {index}")
                self.feedback(f"TESTMSG={message}")
                self._notify("logmsg", index)
        if self.op.fail:
            raise errors.OpExecError("Opcode failure was requested")
        return True
