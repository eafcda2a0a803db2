"""The node's networks, as QEMU's users may not reach them: the cluster's
node addresses (ssconf), and the networks this node's own cluster and
replication addresses sit on.  Netlink and files: call from a thread."""

from __future__ import annotations

import contextlib
import ipaddress

from pyroute2 import IPRoute  # type: ignore[import-untyped]

from corral.node.netrules.policy import Address, Network, static_blocked
from corral.paths import Paths

# ssconf files that name node addresses: "<node> <ip>" lines, or one address.
_NODE_FILES = ("node_primary_ips", "node_secondary_ips")
_ADDRESS_FILES = ("master_ip",)


def cluster_addresses(paths: Paths) -> set[Address]:
    """Every node's primary and secondary IP and the master IP, as ssconf has them."""
    found: set[Address] = set()
    for key in (*_NODE_FILES, *_ADDRESS_FILES):
        try:
            text = paths.ssconf_file(key).read_text()
        except FileNotFoundError:
            continue
        for line in text.splitlines():
            words = line.split()
            if words:
                with contextlib.suppress(ValueError):
                    found.add(ipaddress.ip_address(words[-1]))
    return found


def own_networks(addresses: set[Address]) -> list[Network]:
    """The networks of the interfaces that hold one of ``addresses`` here."""
    out: list[Network] = []
    with IPRoute() as ipr:
        for record in ipr.get_addr():
            # IFA_LOCAL is the node's own end of a point-to-point link.
            text = record.get_attr("IFA_LOCAL") or record.get_attr("IFA_ADDRESS")
            if not text:
                continue
            with contextlib.suppress(ValueError):
                if ipaddress.ip_address(text) in addresses:
                    out.append(ipaddress.ip_network(f"{text}/{record['prefixlen']}", strict=False))
    return out


def blocked(paths: Paths) -> tuple[Network, ...]:
    """Everything :data:`~.policy.RULES` blocks by address (the node's own
    addresses are matched by nft itself)."""
    nodes = cluster_addresses(paths)
    hosts = [ipaddress.ip_network(address) for address in nodes]
    return (*static_blocked(), *hosts, *own_networks(nodes))
