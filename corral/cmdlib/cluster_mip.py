"""OP_CLUSTER_ACTIVATE_MASTER_IP and OP_CLUSTER_DEACTIVATE_MASTER_IP, as
Ganeti's LUClusterActivateMasterIp and LUClusterDeactivateMasterIp: no
hooks of their own (the node runs its master-ip-turnup/turndown hooks)."""

from __future__ import annotations

from corral import constants as C
from corral import errors
from corral.cmdlib.base import LogicalUnit
from corral.master_network import address_owner, master_params, owned_elsewhere
from corral.opcodes import cluster as opc
from corral.rpc.calls_master_ip import node_activate_master_ip, node_deactivate_master_ip


class LUClusterActivateMasterIp(LogicalUnit[opc.OpClusterActivateMasterIp]):
    """Brings the master IP up on the master node."""

    OPCODE = opc.OpClusterActivateMasterIp

    async def check_prereq(self) -> None:
        cluster, master = self.cfg.cluster, self.master_node
        owner = address_owner(self.cfg.nodes(), cluster.master_ip, master)
        if owner is not None:
            raise errors.OpPrereqError(
                owned_elsewhere(owner, cluster.master_ip, master), C.ECODE_STATE
            )

    async def exec(self) -> None:
        cluster, master = self.cfg.cluster, self.master_node
        request = node_activate_master_ip(
            master_params(cluster, master), cluster.use_external_mip_script
        )
        await self.master.rpc.run(master, request, "Could not activate the master IP")


class LUClusterDeactivateMasterIp(LogicalUnit[opc.OpClusterDeactivateMasterIp]):
    """Brings the master IP down on the master node."""

    OPCODE = opc.OpClusterDeactivateMasterIp

    async def exec(self) -> None:
        cluster, master = self.cfg.cluster, self.master_node
        request = node_deactivate_master_ip(
            master_params(cluster, master), cluster.use_external_mip_script
        )
        await self.master.rpc.run(master, request, "Could not deactivate the master IP")
