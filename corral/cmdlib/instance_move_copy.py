"""The disk copy of ``gnt-instance move``, driven from the master.

The target node creates the disks and accepts a one-time transfer id
(``transfer_prepare``); the source node streams every disk to it over mutual
TLS (``transfer_send``); the master follows the copy (``transfer_status``,
about once a second) and writes Ganeti's progress lines to the job log
("disk/0 sent 512M, 180.3 MiB/s, 45%, ETA 3s").  ``abort`` cancels the copy
and removes what the target received; the source's disks are only read.
"""

from __future__ import annotations

import secrets
from typing import Any

from corral import errors
from corral.cmdlib.base import LogicalUnit
from corral.master.services.impexp import format_progress, format_seconds
from corral.objects import Disk, Node
from corral.rpc.client import RpcResult

# How long a status call waits for the copy to end: the progress interval.
STATUS_WAIT = 1.0
# A transfer the target is given but nobody uses for this long expires there.
TRANSFER_TTL = 600.0


class DiskCopy:
    """Copies ``disks`` from ``source`` to ``target`` for the unit ``lu``."""

    def __init__(self, lu: LogicalUnit[Any], source: Node, target: Node, disks: list[Disk]) -> None:
        self.lu = lu
        self.source, self.target = source, target
        self.disks = [d.description().to_wire() for d in disks]
        self.transfer_id = secrets.token_hex(16)
        self.prepared = self.sending = False
        self._announced: set[int] = set()
        self._finished: set[int] = set()

    async def _call(self, node: Node, name: str, args: list[Any]) -> RpcResult:
        return await self.lu.master.rpc.call_one(node.uuid, node.primary_ip, name, args)

    async def run(self) -> None:
        """Copy every disk; OpExecError saying which disk failed, where and how far."""
        if not self.disks:
            return  # a diskless instance: nothing to copy
        tid = self.transfer_id
        res = await self._call(self.target, "transfer_prepare", [tid, self.disks, TRANSFER_TTL])
        if res.failed:
            self.lu.warn("Device creation failed")
            raise errors.OpExecError(
                f"Could not create the disks on node {self.target.name}: {res.fail_msg}"
            )
        self.prepared = True
        for index in range(len(self.disks)):
            self.lu.feedback(f"disk/{index} is now listening, starting export")
        res = await self._call(
            self.source, "transfer_send", [tid, self.target.primary_ip, self.disks]
        )
        res.raise_if_failed(f"Could not start sending the disks on node {self.source.name}")
        self.sending = True
        await self._follow()
        res = await self._call(self.target, "transfer_finish", [tid, True])
        res.raise_if_failed(f"The disks received on node {self.target.name} are not complete")
        self.prepared = False
        await self._forget_source()

    async def _follow(self) -> None:
        while True:
            res = await self._call(self.source, "transfer_status", [self.transfer_id, STATUS_WAIT])
            if res.failed:
                raise errors.OpExecError(
                    f"Lost contact with source node {self.source.name} while copying:"
                    f" {res.fail_msg}"
                )
            status = res.payload
            self._report(status)
            if status["state"] == "done":
                return
            if status["state"] != "running":
                raise errors.OpExecError(
                    f"Errors during disk copy from node {self.source.name} to node"
                    f" {self.target.name}: {status['error']}"
                )

    def _report(self, status: dict[str, Any]) -> None:
        for index, disk in enumerate(status["disks"]):
            name = f"disk/{index}"
            if disk["started"] and index not in self._announced:
                self._announced.add(index)
                self.lu.feedback(f"{name} is sending data on {self.source.name}")
            if index in self._finished or not disk["started"]:
                continue
            if disk["done"]:
                self._finished.add(index)
                self.lu.feedback(f"{name} finished sending data")
                self.lu.feedback(f"{name} finished receiving data")
            elif disk["sent"]:
                progress = format_progress(disk["sent"], disk["size"], disk["seconds"])
                self.lu.feedback(f"{name} sent {progress}")

    async def _forget_source(self) -> None:
        if not self.sending:
            return
        self.sending = False
        res = await self._call(self.source, "transfer_finish", [self.transfer_id, False])
        if res.failed:
            self.lu.warn(f"Could not end the transfer on node {self.source.name}: {res.fail_msg}")

    async def abort(self) -> None:
        """Stop the copy and remove the target's partial disks (best effort, warned)."""
        await self._forget_source()
        if not self.prepared:
            return
        self.prepared = False
        res = await self._call(self.target, "transfer_finish", [self.transfer_id, False])
        if res.failed:
            self.lu.warn(
                f"Could not remove the partial disks on node {self.target.name}: {res.fail_msg};"
                f" the node removes them itself once the transfer is unused for"
                f" {format_seconds(TRANSFER_TTL)} or when its node daemon starts again"
            )
        else:
            self.lu.log_info(f"Removed the partial disks on node {self.target.name}")
