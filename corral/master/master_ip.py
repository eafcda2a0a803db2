"""The master IP follows the mastership: masterd brings it up on its node
when it starts leading and down when it stops (handed over, lease lost,
stopped), before the lease can pass on.

A new master first asks the previous master's node to let the address go
(fenced with the new master's token, so a deposed master's late call cannot
bring it back there; best effort, with a short deadline: that node may be
dead), then brings it up on its own node.  The script on the node refuses
to bring up an address another machine still answers; masterd never asks
for another node's own address (the cluster's first node's, when the
cluster has no master IP of its own), which would cut that node off.
"""

from __future__ import annotations

import asyncio
import logging

from corral.master_network import address_owner, master_params, owned_elsewhere
from corral.objects import Node
from corral.rpc.calls_master_ip import node_activate_master_ip, node_deactivate_master_ip
from corral.services.context import Master

log = logging.getLogger(__name__)

# Seconds the previous master's node gets to let the address go.
FORMER_DEADLINE = 5.0


async def _deactivate(master: Master, node: Node, deadline: float) -> bool:
    cluster = master.cfg.cluster
    request = node_deactivate_master_ip(
        master_params(cluster, node), cluster.use_external_mip_script
    )
    try:
        async with asyncio.timeout(deadline):
            result = await master.rpc.result(node, request, timeout=deadline)
    except TimeoutError:
        log.warning("Master IP %s: %s did not answer in time", cluster.master_ip, node.name)
        return False
    if result.failed:
        log.warning("Could not deactivate the master IP on %s: %s", node.name, result.fail_msg)
        return False
    return True


async def take(master: Master, former: Node | None) -> None:
    """Bring the master IP up on this (the master's) node, the previous
    master's node (``former``, if another) asked to let it go first."""
    cfg = master.cfg
    own = cfg.master_node
    if former is not None and former.uuid != own.uuid and not former.offline:
        await _deactivate(master, former, FORMER_DEADLINE)
    cluster = cfg.cluster
    owner = address_owner(cfg.nodes(), cluster.master_ip, own)
    if owner is not None:
        log.warning("%s", owned_elsewhere(owner, cluster.master_ip, own))
        return
    request = node_activate_master_ip(master_params(cluster, own), cluster.use_external_mip_script)
    result = await master.rpc.result(own, request)
    if result.failed:
        log.error("Could not activate the master IP: %s", result.fail_msg)
    else:
        log.info("Master IP %s up on %s", cluster.master_ip, own.name)


async def drop(master: Master, deadline: float) -> None:
    """Bring the master IP down on this node within ``deadline`` seconds."""
    own = master.cfg.master_node
    if await _deactivate(master, own, deadline):
        log.info("Master IP %s down on %s", master.cfg.cluster.master_ip, own.name)
