"""OP_INSTANCE_QUERY_DATA: everything about instances (``gnt-instance info``)."""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral.cmdlib import instance_utils as U
from corral.cmdlib.base import LogicalUnit
from corral.objects import Instance, Node, NodeGroup
from corral.opcodes import instance as opi
from corral.opcodes.base import REDACTED


class LUInstanceQueryData(LogicalUnit[opi.OpInstanceQueryData]):
    OPCODE = opi.OpInstanceQueryData
    REQ_BGL = False

    def expand_names(self) -> None:
        if self.op.instances:
            self.wanted = [self.cfg.lookup(Instance, n) for n in self.op.instances]
        else:
            self.wanted = self.cfg.instances()

    def declare_locks(self) -> None:
        if self.op.use_locking:
            self.needed_locks[C.LEVEL_INSTANCE] = [i.name for i in self.wanted]
            self.share_locks[C.LEVEL_INSTANCE] = True

    async def exec(self) -> Any:
        running: dict[str, dict[str, dict[str, Any]]] = {}
        if not self.op.static:
            running = await self._live()
        return {inst.name: self._data(inst, running) for inst in self.wanted}

    async def _live(self) -> dict[str, dict[str, dict[str, Any]]]:
        nodes = {i.primary_node for i in self.wanted}
        targets = self.node_addresses(sorted(nodes))
        results = await self.master.rpc.call(
            targets, "all_instances_info", [self.cfg.cluster.enabled_hypervisors]
        )
        return {uuid: res.payload for uuid, res in results.items() if not res.fail_msg}

    def _data(self, inst: Instance, running: dict[str, dict[str, dict[str, Any]]]) -> Any:
        cluster = self.cfg.cluster
        pnode = self.cfg.get(Node, inst.primary_node)
        group = self.cfg.get(NodeGroup, pnode.group) if pnode else None
        if self.op.static:
            run_state = None
        else:
            run_state = "up" if inst.name in running.get(inst.primary_node, {}) else "down"
        return {
            "name": inst.name,
            "config_state": inst.admin_state,
            "run_state": run_state,
            "pnode": U.node_name(self.cfg, inst.primary_node),
            "pnode_group_uuid": group.uuid if group else None,
            "pnode_group_name": group.name if group else None,
            "snodes": [U.node_name(self.cfg, n) for n in inst.secondary_nodes],
            "snodes_group_uuids": [],
            "snodes_group_names": [],
            "os": inst.os,
            "network_port": inst.network_port,
            "disks": [_disk(d) for d in inst.disks],
            "hypervisor": inst.hypervisor,
            "hv_instance": inst.hvparams,
            "hv_actual": U.filled_hvparams(cluster, inst),
            "be_instance": inst.beparams,
            "be_actual": U.filled_beparams(cluster, inst),
            "os_instance": {**inst.osparams, **{k: REDACTED for k in inst.osparams_private}},
            "os_actual": {
                **U.merged_osparams(cluster, inst.os, inst.osparams, {}, {}),
                **{k: REDACTED for k in inst.osparams_private},
            },
            "uuid": inst.uuid,
            "serial_no": inst.serial_no,
            "mtime": inst.mtime,
            "ctime": inst.ctime,
            "disk_template": inst.disk_template,
            "nics": [_nic(cluster, n) for n in inst.nics],
            "tags": sorted(inst.tags),
        }


def _disk(disk: Any) -> dict[str, Any]:
    return {
        "dev_type": disk.dev_type,
        "logical_id": disk.logical_id,
        "iv_name": disk.iv_name,
        "size": disk.size,
        "mode": disk.mode,
        "name": disk.name,
        "uuid": disk.uuid,
        "spindles": disk.spindles,
        "pstatus": None,
        "sstatus": None,
        "children": [],
    }


def _nic(cluster: Any, nic: Any) -> list[Any]:
    params = U.filled_nicparams(cluster, nic)
    return [
        nic.name,
        nic.uuid,
        nic.ip,
        nic.mac,
        params["mode"],
        params["link"],
        params["vlan"],
        nic.network,
        None,
    ]
