"""OP_INSTANCE_QUERY_DATA: everything about instances (``gnt-instance info``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral.cmdlib import instance_utils as U
from corral.cmdlib.base import LogicalUnit
from corral.netpool import network_dict
from corral.objects import NIC, Disk, Instance, Network, Node, NodeGroup
from corral.opcodes import instance as opi
from corral.services.params import filled_beparams, filled_hvparams, filled_nicparams, os_spec
from corral.services.running import Running, running_instances

if TYPE_CHECKING:
    from corral.config.manager import ConfigManager


class LUInstanceQueryData(LogicalUnit[opi.OpInstanceQueryData]):
    OPCODE = opi.OpInstanceQueryData
    REQ_BGL = False

    def expand_names(self) -> None:
        if self.op.instances:
            self.wanted = [self.expand(Instance, n) for n in self.op.instances]
        else:
            self.wanted = self.cfg.instances()

    def declare_locks(self) -> None:
        if self.op.use_locking:
            self.needed_locks[C.LEVEL_INSTANCE] = [i.name for i in self.wanted]
            self.share_locks[C.LEVEL_INSTANCE] = True

    async def exec(self) -> Any:
        running: Running = {}
        if not self.op.static:
            running = await self._live()
        return {inst.name: self._data(inst, running) for inst in self.wanted}

    async def _live(self) -> Running:
        """What runs on the primary nodes, asked per hypervisor in use."""
        addresses = dict(self.node_addresses(sorted({i.primary_node for i in self.wanted})))
        targets = {
            (i.primary_node, addresses[i.primary_node], i.hypervisor)
            for i in self.wanted
            if i.primary_node in addresses
        }
        return await running_instances(self.master, targets)

    def _run_state(self, inst: Instance, running: Running) -> Any:
        """The actual state, "up" or "down"; None (with a warning) when the
        primary node is offline or cannot tell for this instance's hypervisor."""
        node = U.node_name(self.cfg, inst.primary_node)
        res = running.get((inst.primary_node, inst.hypervisor))
        if res is None:
            self.warn(
                f"Primary node {node} is marked offline, returning static information only"
                f" for instance {inst.name}"
            )
            return None
        if res.fail_msg:
            self.warn(
                f"Cannot get the state of instance {inst.name} from node {node}"
                f" ({res.fail_msg}), returning static information only"
            )
            return None
        return "up" if inst.name in res.payload else "down"

    def _data(self, inst: Instance, running: Running) -> Any:
        cluster = self.cfg.cluster
        pnode = self.cfg.get(Node, inst.primary_node)
        group = self.cfg.get(NodeGroup, pnode.group) if pnode else None
        run_state = None if self.op.static else self._run_state(inst, running)
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
            "disks": [_disk(self.cfg, d) for d in inst.disks],
            "hypervisor": inst.hypervisor,
            "hv_instance": inst.hvparams,
            "hv_actual": filled_hvparams(cluster, inst),
            "be_instance": inst.beparams,
            "be_actual": filled_beparams(cluster, inst),
            "os_instance": {**inst.osparams, **{k: C.REDACTED for k in inst.osparams_private}},
            "os_actual": {
                **os_spec(cluster, inst.os, inst.osparams).shown(),
                **{k: C.REDACTED for k in inst.osparams_private},
            },
            "uuid": inst.uuid,
            "serial_no": inst.serial_no,
            "mtime": inst.mtime,
            "ctime": inst.ctime,
            "disk_template": inst.disk_template,
            "nics": [_nic(self.cfg, n) for n in inst.nics],
            "tags": sorted(inst.tags),
        }


def _disk(cfg: ConfigManager, disk: Disk) -> dict[str, Any]:
    out = {
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
        "children": [_disk(cfg, child) for child in disk.children],
    }
    if len(disk.nodes) > 1:
        # Corral's own keys (Ganeti's tools show none of them): a mirrored
        # disk's copies, each current or outdated, and its sync generation.
        out["copies"] = [
            [U.node_name(cfg, node), "outdated" if node in disk.outdated else "current"]
            for node in disk.nodes
        ]
        out["generation"] = disk.generation
    return out


def _nic(cfg: ConfigManager, nic: NIC) -> list[Any]:
    """Ganeti's NICToTuple: the NIC, its filled parameters, its network's dict."""
    params = filled_nicparams(cfg.cluster, nic)
    network = cfg.get(Network, nic.network) if nic.network else None
    return [
        nic.name,
        nic.uuid,
        nic.ip,
        nic.mac,
        params["mode"],
        params["link"],
        params["vlan"],
        nic.network,
        None if network is None else network_dict(cfg, network),
    ]
