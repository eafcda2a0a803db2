"""The master IP's parameters, as Ganeti's configuration gives them out
(``GetMasterNetworkParameters``), and the rule of its netmask."""

from __future__ import annotations

import ipaddress
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from corral.objects import Cluster, Node
    from corral.rpc.wire import MasterNetworkWire

# The whole address: Ganeti's default netmask, by IP version.
FULL_NETMASK = {4: 32, 6: 128}


def ip_version(address: str) -> int:
    """4 or 6: the version of ``address`` (the cluster's primary IP version)."""
    return ipaddress.ip_address(address).version


def valid_netmask(netmask: int, version: int) -> bool:
    """Ganeti's ValidateNetmask: a CIDR prefix length, 1 to the address's bits."""
    return 0 < netmask <= FULL_NETMASK[version]


def master_params(cluster: Cluster, master: Node) -> MasterNetworkWire:
    """The master network parameters of ``cluster`` whose master is ``master``."""
    family = socket.AF_INET6 if ip_version(cluster.master_ip) == 6 else socket.AF_INET
    return {
        "uuid": master.uuid,
        "ip": cluster.master_ip,
        "netmask": cluster.master_netmask,
        "netdev": cluster.master_netdev,
        "ip_family": int(family),
    }
