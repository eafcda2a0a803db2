"""OP_BACKUP_REMOVE: an instance's exports removed from every node that
keeps one (Ganeti's LUBackupRemove).  The instance need not exist any more:
an export outlives its instance, and is then named by the instance's full name.
"""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral.cmdlib.base import ALL_SET, LogicalUnit
from corral.objects import Instance
from corral.opcodes import backup as opb
from corral.rpc.calls_impexp import export_list, export_remove


class LUBackupRemove(LogicalUnit[Any]):
    OPCODE = opb.OpBackupRemove
    REQ_BGL = False

    def declare_locks(self) -> None:
        # Every node, as Ganeti: any of them may hold an export; the instance
        # itself is not locked, nothing happens to it.
        self.needed_locks[C.LEVEL_NODE] = ALL_SET

    async def exec(self) -> Any:
        inst = self.cfg.find(Instance, self.op.instance_name)
        name = inst.name if inst is not None else self.op.instance_name
        nodes = sorted(self.cfg.nodes(), key=lambda n: n.name)
        online = [n for n in nodes if not n.offline]
        for node in nodes:
            if node.offline:
                self.warn(f"Failed to query node {node.name} (continuing): Node is marked offline")
        lists = await self.master.rpc.results(online, export_list())
        found = False
        for node in online:
            res = lists[node.uuid]
            if not res.report(self.warn, f"Failed to query node {node.name} (continuing)"):
                continue
            if name not in res.payload:
                continue
            found = True
            await self.master.rpc.attempt(
                node,
                export_remove(name),
                self.warn,
                f"Could not remove export for instance {name} on node {node.name}",
            )
        if inst is None and not found:
            self.feedback(
                "Export not found. If trying to remove an export belonging to a deleted"
                " instance please use its Fully Qualified Domain Name."
            )
        return None
