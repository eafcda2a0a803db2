"""The disk copy of ``gnt-instance move``, driven from the master.

The target node creates the disks and records them under a one-time
transfer id (``transfer_prepare``), so that a failure never leaves partial
disks behind: ``transfer_finish`` keeps or removes them, a transfer unused
for its time-to-live expires, and a node daemon that died resolves its
records when it starts again.  The bytes move on the import/export engine
(:mod:`corral.services.impexp`): an import on the target writes each
disk, an export on the source reads it, and the engine writes Ganeti's
progress lines to the job log ("disk/0 sent 512M, 180.3 MiB/s, 45%, ETA 3s").
While it copies, the master keeps the transfer alive on the target
(``transfer_touch``).  A failed copy names the cause each failed disk's
end reported ("disk/0 failed to receive data on node2: No space left ...").
The move's record (:mod:`corral.cmdlib.intents`) removes what the target
received when the move fails or is interrupted; the source's disks are only
read.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from corral import constants as C
from corral import errors
from corral import impexp_kinds as K
from corral.cmdlib.base import LogicalUnit
from corral.objects import Disk, Node
from corral.rpc.calls_transfer import transfer_finish, transfer_prepare, transfer_touch
from corral.rpc.result import NodeCallError
from corral.services import impexp

# A transfer the target is given but nobody uses for this long expires there.
TRANSFER_TTL = 600.0
# While the disks are copied the master renews the transfer this often.
TOUCH_INTERVAL = TRANSFER_TTL / 10


def _descriptor(name: str, disks: list[Disk]) -> dict[str, Any]:
    """The little of an instance descriptor a disk import or export needs:
    each disk's size (progress) and description (the node finds the disk)."""
    return {
        "name": name,
        "disks": [{"size": d.size, "description": d.description().to_wire()} for d in disks],
    }


class _Causes(impexp.Reporter):
    """The copy's job log lines; and why each disk failed.  Both ends may
    fail on their own (the receiver's disk fills, the sender then loses the
    connection): the error of an end that failed by itself is the cause, not
    its peer's lost connection nor the abort the master sent."""

    def __init__(self) -> None:
        self._best: dict[str, tuple[int, str]] = {}

    def finished(self, lu: impexp.Unit, ep: impexp.Endpoint) -> None:
        super().finished(lu, ep)
        failure = (ep.status or {}).get("failure")
        if ep.success or failure == "aborted" or (failure is None and ep.aborted):
            return
        rank = 1 if failure == "peer" else 0
        if ep.label in self._best and self._best[ep.label][0] <= rank:
            return
        verb = "send" if ep.mode == impexp.EXPORT else "receive"
        self._best[ep.label] = (
            rank,
            f"{ep.label} failed to {verb} data on {ep.node.name}: {ep.message}",
        )

    def cause(self, label: str) -> str:
        """Why the disk named ``label`` failed."""
        return self._best[label][1] if label in self._best else f"{label} failed"


class DiskCopy:
    """Copies ``disks`` from ``source`` to ``target`` for the unit ``lu``."""

    def __init__(self, lu: LogicalUnit[Any], source: Node, target: Node, disks: list[Disk]) -> None:
        self.lu = lu
        self.source, self.target = source, target
        self.disk_objs = disks
        self.disks = [d.description().to_wire() for d in disks]
        self.transfer_id = secrets.token_hex(16)

    async def run(self) -> None:
        """Copy every disk; OpExecError saying which disks failed, where and why."""
        if not self.disks:
            return  # a diskless instance: nothing to copy
        tid = self.transfer_id
        rpc = self.lu.master.rpc
        try:
            await rpc.run(
                self.target,
                transfer_prepare(tid, self.disks, TRANSFER_TTL),
                f"Could not create the disks on node {self.target.name}",
            )
        except NodeCallError:
            self.lu.warn("Device creation failed")
            raise
        toucher = asyncio.create_task(self._keep_alive())
        try:
            await self._copy()
        finally:
            toucher.cancel()  # it only sleeps or renews: nothing to wait for
        await rpc.run(
            self.target,
            transfer_finish(tid, True),
            f"The disks received on node {self.target.name} are not complete",
        )

    async def _copy(self) -> None:
        # Source and target disks share their descriptions (a file disk keeps
        # its path); each node resolves them under its own storage.
        desc = _descriptor(str(self.lu.op.instance_name), self.disk_objs)
        pairs = [
            (
                impexp.Endpoint(self.source, K.DISK, {"index": index}),
                impexp.Endpoint(self.target, K.DISK, {"index": index}),
            )
            for index in range(len(self.disks))
        ]
        causes = _Causes()
        results = await impexp.transfer_within_cluster(
            self.lu, pairs, desc, desc, C.IEC_NONE, causes
        )
        failed = [f"disk/{i}" for i, ok in enumerate(results) if not ok]
        if failed:
            why = "; ".join(causes.cause(label) for label in failed)
            raise errors.OpExecError(
                f"Errors during disk copy from node {self.source.name} to node"
                f" {self.target.name}: {why}"
            )

    async def _keep_alive(self) -> None:
        """Renew the transfer on the target while the bytes flow (a large
        disk may take longer than the time-to-live); failures are the copy's."""
        while True:
            await asyncio.sleep(TOUCH_INTERVAL)
            await self.lu.master.rpc.result(self.target, transfer_touch(self.transfer_id))
