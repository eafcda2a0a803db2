"""What ``gnt-cluster modify`` does to the master IP, as Ganeti's
LUClusterSetParams: a new device takes the master IP down first and up again
once the configuration is changed; a new netmask is given to the address."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors
from corral.master_network import (
    address_owner,
    ip_version,
    master_params,
    owned_elsewhere,
    valid_netmask,
)
from corral.objects import Cluster
from corral.rpc.calls_master_ip import (
    node_activate_master_ip,
    node_change_master_netmask,
    node_deactivate_master_ip,
)

if TYPE_CHECKING:
    from corral.cmdlib.cluster import LUClusterSetParams


def check_netmask(cluster: Cluster, netmask: int) -> None:
    """Ganeti's _ValidateNetmask, against the cluster's primary IP version."""
    if not valid_netmask(netmask, ip_version(cluster.master_ip)):
        raise errors.OpPrereqError(f"CIDR netmask ({netmask}) not valid", C.ECODE_INVAL)


async def before_change(
    lu: LUClusterSetParams, cluster: Cluster, changes: list[tuple[str, Any]]
) -> None:
    """Down from the current device; the new netmask on the address (both
    changed in ``cluster``)."""
    op, master = lu.op, lu.master_node
    rpc = lu.master.rpc
    current = lu.cfg.cluster
    if op.master_netdev:
        lu.feedback(f"Shutting down master ip on the current netdev ({current.master_netdev})")
        params = master_params(current, master)
        request = node_deactivate_master_ip(params, current.use_external_mip_script)
        result = await rpc.result(master, request)
        if not op.force:
            result.get("Could not disable the master ip")
        elif result.failed:
            lu.feedback(f"Could not disable the master ip (continuing anyway): {result.fail_msg}")
        lu.feedback(f"Changing master_netdev from {params['netdev']} to {op.master_netdev}")
        _change(cluster, changes, "master_netdev", op.master_netdev)
    if op.master_netmask:
        lu.feedback(f"Changing master IP netmask to {op.master_netmask}")
        request = node_change_master_netmask(
            current.master_netmask, op.master_netmask, current.master_ip, current.master_netdev
        )
        result = await rpc.result(master, request)
        result.report(lu.feedback, "Could not change the master IP netmask")
        _change(cluster, changes, "master_netmask", op.master_netmask)


def _change(cluster: Cluster, changes: list[tuple[str, Any]], name: str, value: Any) -> None:
    if getattr(cluster, name) != value:
        setattr(cluster, name, value)
        changes.append((name, value))


async def restart(lu: LUClusterSetParams) -> None:
    """Up on the new device (a failure only warned about, as Ganeti's)."""
    cluster, master = lu.cfg.cluster, lu.master_node
    owner = address_owner(lu.cfg.nodes(), cluster.master_ip, master)
    if owner is not None:
        lu.warn(owned_elsewhere(owner, cluster.master_ip, master))
        return
    lu.feedback(f"Starting the master ip on the new master netdev ({cluster.master_netdev})")
    request = node_activate_master_ip(
        master_params(cluster, master), cluster.use_external_mip_script
    )
    result = await lu.master.rpc.result(master, request)
    what = "Could not re-enable the master ip on the master, please restart manually"
    result.report(lu.warn, what)
