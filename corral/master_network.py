"""The master IP's parameters, as Ganeti's configuration gives them out
(``GetMasterNetworkParameters``), and the rule of its netmask."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
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


def address_owner(nodes: Iterable[Node], ip: str, master: Node) -> Node | None:
    """The node other than ``master`` whose own (primary or secondary)
    address ``ip`` is, if any.  The master IP must never be brought up on
    ``master`` then: two machines holding one address cut its owner off from
    the master's node (each drops the other's packets as its own).  It is
    so when the cluster took its first node's address as its master IP (no
    address of its own at ``gnt-cluster init``) and the mastership moved."""
    for node in nodes:
        if node.uuid != master.uuid and ip in (node.primary_ip, node.secondary_ip):
            return node
    return None


def owned_elsewhere(owner: Node, ip: str, master: Node) -> str:
    """Why the master IP stays off ``master`` (see :func:`address_owner`)."""
    return (
        f"The master IP {ip} is node {owner.name}'s own address: not bringing it up on"
        f" {master.name}; give the cluster an address of its own (gnt-cluster rename"
        " to a name that resolves to it)"
    )
