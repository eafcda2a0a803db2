"""What the users QEMU runs as may reach on the network: declared once, here.

The 2.2 design's fourth KVM security step: a broken-into QEMU runs as the
kvm security user (``security_model=user``) or a uid of the cluster's pool
(``security_model=pool``), and these rules keep that uid off the node's own
networks.  They match the owner of the sending socket (``meta skuid``) in
the output hook, so they see only what QEMU itself opens on the host: a
guest's traffic through its taps is no socket of QEMU's and flows as before
(to 169.254.169.254 too, through the guest's own communication tap).
Unix sockets (masterd's luxi socket, the instances' QMP and serial sockets)
are no network traffic: their directories' permissions keep QEMU out.

:data:`RULES` is read in order; the first that matches decides.  What is not
listed stays allowed (the guests' own world: QEMU's features that fetch from
elsewhere, such as a ``cdrom_image_path`` URL, keep working unless they point
at the node's networks).  A refusal is an ICMP "administratively
prohibited": the connect fails at once (EHOSTUNREACH; EPERM for datagrams).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

ACCEPT = "accept"
REJECT = "reject with icmpx admin-prohibited"

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Rule:
    """One line of the policy: what it is (for people), its nft match, its verdict."""

    what: str
    match: str
    verdict: str


# The policy, in order.  Links (``@links4``/``@links6``) are the connections
# Corral itself asks QEMU to open, each for one uid, address and port while it
# is needed: a live migration's memory stream to the target QEMU's listener
# (its migration_port) and the NBD export of the disks a migration copies
# (a port the target's noded bound).  The blocked sets hold the loopback
# networks, the metadata address, every node's primary and secondary IP and
# the master IP (ssconf), and the networks of this node's own cluster and
# replication addresses; ``fib daddr type local`` adds every address this
# node has (noded, RAPI, SSH, metad, whatever listens on one of them).
RULES: tuple[Rule, ...] = (
    Rule("answers on connections others opened to QEMU (VNC, incoming migration)",
         "ct state established", ACCEPT),
    Rule("a migration's links to the target node (memory stream, copied disks)",
         "meta skuid . ip daddr . tcp dport @links4", ACCEPT),
    Rule("a migration's links to the target node, IPv6",
         "meta skuid . ip6 daddr . tcp dport @links6", ACCEPT),
    # Broadcasts and multicasts too: they reach the node's own listeners (confd's UDP).
    Rule("every address of this node, its broadcasts and multicasts",
         "fib daddr type { local, broadcast, multicast }", REJECT),
    Rule("loopback, metadata, the cluster's nodes and networks", "ip daddr @blocked4", REJECT),
    Rule("loopback, the cluster's nodes and networks, IPv6", "ip6 daddr @blocked6", REJECT),
)  # fmt: skip

# Blocked whatever the cluster looks like.
STATIC_BLOCKED: tuple[str, ...] = ("127.0.0.0/8", "169.254.169.254/32", "::1/128")

GUEST_CHAIN = "guest"
UIDS_SET = "uids"


@dataclass(frozen=True)
class Link:
    """A connection QEMU running as ``uid`` may open: to ``address``, TCP ``port``."""

    uid: int
    address: Address
    port: int


@dataclass(frozen=True)
class State:
    """Everything the table holds: the uids ruled, the links, the blocked networks."""

    uids: frozenset[int]
    links: frozenset[Link]
    blocked: tuple[Network, ...]


def render(table: str, state: State) -> str:
    """The nft script that replaces ``table`` (family inet) by ``state``'s,
    in one transaction; an empty ``state`` removes it."""
    # Declaring the table first makes the delete succeed when it is absent.
    lines = [f"table inet {table}", f"delete table inet {table}"]
    if state.uids:
        lines += _table(table, state)
    return "\n".join(lines) + "\n"


def _table(table: str, state: State) -> list[str]:
    links = {4: _link_elements(state.links, 4), 6: _link_elements(state.links, 6)}
    blocked = {4: _networks(state.blocked, 4), 6: _networks(state.blocked, 6)}
    out = [f"table inet {table} {{"]
    out += _set(UIDS_SET, "typeof meta skuid", (str(u) for u in sorted(state.uids)))
    for version, family in ((4, "ip"), (6, "ip6")):
        typeof = f"typeof meta skuid . {family} daddr . tcp dport"
        out += _set(f"links{version}", typeof, links[version])
        kind = f"type ipv{version}_addr; flags interval"
        out += _set(f"blocked{version}", kind, blocked[version])
    out += [
        "  chain output {",
        "    type filter hook output priority filter; policy accept;",
        f"    meta skuid @{UIDS_SET} jump {GUEST_CHAIN}",
        "  }",
        f"  chain {GUEST_CHAIN} {{",
        *(f"    {rule.match} {rule.verdict}" for rule in RULES),
        "  }",
        "}",
    ]
    return out


def _set(name: str, kind: str, elements: Iterable[str]) -> list[str]:
    listed = list(elements)
    body = f"    elements = {{ {', '.join(listed)} }}" if listed else None
    return [f"  set {name} {{", f"    {kind}", *([body] if body else []), "  }"]


def _link_elements(links: Iterable[Link], version: int) -> list[str]:
    chosen = sorted((k for k in links if k.address.version == version), key=_link_key)
    return [f"{k.uid} . {k.address} . {k.port}" for k in chosen]


def _link_key(link: Link) -> tuple[int, int, int]:
    return link.uid, int(link.address), link.port


def _networks(networks: Iterable[Network], version: int) -> list[str]:
    # Interval sets refuse overlapping elements: collapse them first.
    if version == 4:
        v4 = [n for n in networks if isinstance(n, ipaddress.IPv4Network)]
        return [str(n) for n in ipaddress.collapse_addresses(v4)]
    v6 = [n for n in networks if isinstance(n, ipaddress.IPv6Network)]
    return [str(n) for n in ipaddress.collapse_addresses(v6)]


def static_blocked() -> list[Network]:
    """:data:`STATIC_BLOCKED` as networks."""
    return [ipaddress.ip_network(text) for text in STATIC_BLOCKED]
