"""Calls of the master IP (:mod:`corral.node.master_ip`)."""

from __future__ import annotations

import logging

from corral import errors
from corral.node import master_ip as mip
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.rpc import calls_master_ip as calls
from corral.rpc.wire import MasterNetworkWire

log = logging.getLogger(__name__)


def _own_address(ctx: NodeContext, ip: str, doing: str) -> bool:
    """Whether ``ip`` is this node's primary address (logged: left alone)."""
    if ip != ctx.address:
        return False
    log.info("The master IP %s is this node's primary address: not %s it", ip, doing)
    return True


@rpc_handler(calls.node_activate_master_ip)
async def node_activate_master_ip(
    ctx: NodeContext, master_params: MasterNetworkWire, use_external_mip_script: bool
) -> None:
    await mip.setup(ctx.paths, mip.START, master_params, use_external_mip_script)


@rpc_handler(calls.node_deactivate_master_ip)
async def node_deactivate_master_ip(
    ctx: NodeContext, master_params: MasterNetworkWire, use_external_mip_script: bool
) -> None:
    if _own_address(ctx, master_params["ip"], "removing"):
        return
    await mip.setup(ctx.paths, mip.STOP, master_params, use_external_mip_script)


@rpc_handler(calls.node_change_master_netmask)
async def node_change_master_netmask(
    ctx: NodeContext, old_netmask: int, netmask: int, master_ip: str, master_netdev: str
) -> None:
    if old_netmask == netmask or _own_address(ctx, master_ip, "changing the netmask of"):
        return
    _, holders = await mip.run_script(["ip", "-o", "addr", "show", "to", master_ip], {})
    if not holders:
        raise errors.OpExecError(
            "The master IP address is not up, not attempting to change its netmask"
        )
    steps = (
        ("add", netmask, "Could not set the new netmask on the master IP address"),
        ("del", old_netmask, "Could not bring down the master IP address with the old netmask"),
    )
    for verb, bits, failure in steps:
        cmd = ["ip", "address", verb, f"{master_ip}/{bits}", "dev", master_netdev]
        code, output = await mip.run_script(cmd, {})
        if code != 0:
            log.error("%s: %s", failure, output)
            raise errors.OpExecError(failure)
