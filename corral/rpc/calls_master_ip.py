"""Node calls of the master IP (Ganeti's ``node_activate_master_ip`` and
kin): noded runs the master IP setup script on the master node
(:mod:`corral.node.master_ip`)."""

# The bodies are the signatures' only: mypy must not ask them for a result.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from corral import constants as C
from corral.rpc.declare import CHANGES, node_call
from corral.rpc.wire import MasterNetworkWire


@node_call(C.RPC_TMO_FAST, effect=CHANGES, cluster_client_only=True)
def node_activate_master_ip(
    master_params: MasterNetworkWire, use_external_mip_script: bool
) -> None:
    """Bring the master IP up on this node (the setup script's ``start``)."""


@node_call(C.RPC_TMO_FAST, effect=CHANGES, cluster_client_only=True)
def node_deactivate_master_ip(
    master_params: MasterNetworkWire, use_external_mip_script: bool
) -> None:
    """Bring the master IP down on this node (the setup script's ``stop``);
    never the node's own primary address."""


@node_call(C.RPC_TMO_FAST, effect=CHANGES, cluster_client_only=True)
def node_change_master_netmask(
    old_netmask: int, netmask: int, master_ip: str, master_netdev: str
) -> None:
    """Give the master IP, up on this node, the netmask ``netmask``."""
