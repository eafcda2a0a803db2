"""Connecting an instance's tap to the node's network, and undoing it.

Ganeti's NIC modes, done through netlink (pyroute2) instead of its kvm-ifup
script: *bridged* puts the tap in the bridge named by the NIC's link;
*routed* routes the instance's address to the tap in the table named by the
link (main when empty), sends what the instance sends through that table,
and answers ARP/NDP for the instance's network (proxy ARP).

Every function here blocks on netlink for a few milliseconds: call it from a
thread (``await asyncio.to_thread(configure_nic, ...)``), never on noded's
event loop, where pyroute2's synchronous API (it runs an event loop of its
own) raises RuntimeError.  They act in the calling thread's network namespace.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyroute2 import IPRoute, NetlinkError  # type: ignore[import-untyped]

from corral import constants as C
from corral import errors
from corral.node.netdev.tables import table_id
from corral.node.netdev.tap import TAP_PREFIX

MODE_BRIDGED = "bridged"
MODE_ROUTED = "routed"
MODE_OVS = "openvswitch"
_MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
_RTPROT_STATIC = 4
_RTPROT_BOOT = 3
_RT_SCOPE_LINK = 253
# The broadcast address Ganeti's QA finds on a communication tap.
_COMMUNICATION_BROADCAST = "169.254.255.255"
# Before the rule of the main table (32766), as `ip rule add` would place it.
_RULE_PRIORITY = 32000
# Per-interface sysctls of a routed tap (Ganeti's kvm-ifup sets the same).
_ROUTED_SYSCTLS = {
    socket.AF_INET: ("ipv4", ("proxy_arp", "forwarding")),
    socket.AF_INET6: ("ipv6", ("proxy_ndp", "forwarding")),
}


def configure_nic(
    tap: str,
    mode: str,
    link: str,
    ip: str | None,
    mac: str,
    vlan: str = "",
    node: str | None = None,
) -> None:
    """Connect the tap ``tap`` of a NIC as its ``mode`` says, and set it up.

    ``mac`` is the guest's; ``node`` names this node in messages (default:
    the host name).  On any failure the tap is removed again (its instance
    cannot start) and OpExecError says what to change.  Blocking.
    """
    try:
        if mode == MODE_BRIDGED:
            _bridge(tap, link, mac, vlan, node)
        elif mode == MODE_ROUTED:
            _route(tap, link, ip)
        elif mode == MODE_OVS:
            raise errors.OpExecError(
                f"NIC mode '{MODE_OVS}' is not implemented by Corral yet;"
                f" use '{MODE_BRIDGED}' or '{MODE_ROUTED}'"
            )
        else:
            raise errors.OpExecError(f"Unknown NIC mode '{mode}'")
    except BaseException:
        remove_tap(tap)
        raise


def configure_communication(tap: str, ip: str | None) -> None:
    """Set up the tap of an instance communication NIC as Ganeti's kvm-ifup-os
    does: up, 169.254.169.254/32 on the node's side (every such tap has it) and
    a /32 route in the main table to the guest's address through this tap
    alone, so that a request's tap tells which guest sent it.

    On any failure the tap is removed again and OpExecError says why.  Blocking.
    """
    try:
        address = _communication_address(ip)
        with IPRoute() as ipr:
            index = _tap_index(ipr, tap)
            ipr.link("set", index=index, state="up")
            with _unless_present():
                ipr.addr(
                    "add",
                    index=index,
                    address=C.INSTANCE_COMMUNICATION_HOST_IP,
                    prefixlen=32,
                    broadcast=_COMMUNICATION_BROADCAST,
                )
            # As `ip route add IP/32 dev TAP` (protocol boot, scope link).
            ipr.route(
                "replace",
                dst=str(address),
                dst_len=32,
                oif=index,
                proto=_RTPROT_BOOT,
                scope=_RT_SCOPE_LINK,
            )
    except BaseException:
        remove_tap(tap)
        raise


def _communication_address(ip: str | None) -> ipaddress.IPv4Address:
    network = ipaddress.ip_network(C.INSTANCE_COMMUNICATION_NETWORK4)
    try:
        address = ipaddress.ip_address(ip or "")
    except ValueError:
        raise errors.OpExecError(
            f"An instance communication NIC needs an IPv4 address of its network; got '{ip}'"
        ) from None
    if not isinstance(address, ipaddress.IPv4Address) or address not in network:
        raise errors.OpExecError(
            f"The address {address} of an instance communication NIC is not in {network}"
        )
    return address


def bridge_problem(name: str, node: str | None = None) -> str | None:
    """Why NICs cannot be bridged to ``name`` on this node, or None.

    For migration targets and ``gnt-cluster verify``.  Blocking.
    """
    with IPRoute() as ipr:
        return _bridge_problem(ipr, name, node)


def remove_tap(name: str) -> None:
    """Remove the tap ``name`` and the routing rules made for it.

    Its routes go with it.  Removing what is gone already is not an error,
    so this also cleans up after a QEMU that died.  Blocking.
    """
    with IPRoute() as ipr:
        _delete_rules(ipr, name)
        index = _index(ipr, name)
        if index is not None:
            with _unless_gone():
                ipr.link("del", index=index)


def list_taps(prefix: str = TAP_PREFIX) -> list[str]:
    """Corral's taps on this node (names starting with ``prefix``), and the
    names of taps gone but whose routing rules remain: what a restarted noded
    compares with its running instances to clean up.  Blocking."""
    names: set[str] = set()
    with IPRoute() as ipr:
        for msg in ipr.get_links():
            name = msg.get_attr("IFLA_IFNAME")
            if name.startswith(prefix) and _kind(msg) == "tun":
                names.add(name)
        for family in _ROUTED_SYSCTLS:
            for rule in ipr.get_rules(family=family):
                name = rule.get_attr("FRA_IIFNAME")
                if name and name.startswith(prefix):
                    names.add(name)
    return sorted(names)


def _bridge(tap: str, link: str, mac: str, vlan: str, node: str | None) -> None:
    if vlan:
        raise errors.OpExecError(
            f"VLANs on bridged NICs (vlan '{vlan}') are not implemented by Corral yet;"
            " clear the NIC's vlan"
        )
    with IPRoute() as ipr:
        problem = _bridge_problem(ipr, link, node)
        if problem:
            raise errors.OpExecError(problem)
        bridge = _index(ipr, link)
        bridge_mtu = ipr.get_links(bridge)[0].get_attr("IFLA_MTU")
        # A bridge takes the lowest MAC of its ports: an fe: tap never wins
        # (libvirt's convention: fe: and the rest of the guest's MAC).
        index = _tap_index(ipr, tap)
        ipr.link("set", index=index, address=_tap_mac(mac), mtu=bridge_mtu)
        ipr.link("set", index=index, master=bridge, state="up")


def _route(tap: str, link: str, ip: str | None) -> None:
    if not ip:
        raise errors.OpExecError(
            "A routed NIC needs an IP address; set the NIC's ip or use bridged mode"
        )
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        raise errors.OpExecError(f"Invalid IP address '{ip}' of a routed NIC") from None
    family = socket.AF_INET if address.version == 4 else socket.AF_INET6
    table = table_id(link)
    with IPRoute() as ipr:
        index = _tap_index(ipr, tap)
        ipr.link("set", index=index, state="up")
        _delete_rules(ipr, tap)
        if link:
            # What the instance sends is routed by its table too.
            ipr.rule("add", family=family, iifname=tap, table=table, priority=_RULE_PRIORITY)
        ipr.route(
            "replace",
            family=family,
            dst=str(address),
            dst_len=address.max_prefixlen,
            oif=index,
            table=table,
            proto=_RTPROT_STATIC,
        )
    version, names = _ROUTED_SYSCTLS[family]
    for name in names:
        Path(f"/proc/sys/net/{version}/conf/{tap}/{name}").write_text("1")


def _bridge_problem(ipr: IPRoute, name: str, node: str | None) -> str | None:
    where = f"node {node or socket.gethostname()}"
    if not name:
        return f"A bridged NIC needs a bridge as its link; set the NIC's link (on {where})"
    index = _index(ipr, name)
    if index is None:
        return f"Bridge '{name}' does not exist on {where}; create it or change the NIC's link"
    if _kind(ipr.get_links(index)[0]) != "bridge":
        return f"'{name}' on {where} is not a bridge; change the NIC's link"
    return None


def _tap_mac(mac: str) -> str:
    mac = mac.lower()
    if not _MAC.match(mac):
        raise errors.OpExecError(f"Invalid MAC address '{mac}' of a NIC")
    return "fe" + mac[2:]


def _index(ipr: IPRoute, name: str) -> int | None:
    found = ipr.link_lookup(ifname=name)
    return int(found[0]) if found else None


def _tap_index(ipr: IPRoute, name: str) -> int:
    index = _index(ipr, name)
    if index is None:
        raise errors.OpExecError(f"The tap '{name}' does not exist (its QEMU died?)")
    return index


def _kind(msg: Any) -> str | None:
    kind = msg.get_nested("IFLA_LINKINFO", "IFLA_INFO_KIND")
    return str(kind) if kind is not None else None


def _delete_rules(ipr: IPRoute, name: str) -> None:
    """Delete the routing rules for packets coming in through ``name``."""
    for family in _ROUTED_SYSCTLS:
        for rule in ipr.get_rules(family=family):
            if rule.get_attr("FRA_IIFNAME") != name:
                continue
            with _unless_gone():
                ipr.rule(
                    "del",
                    family=family,
                    iifname=name,
                    table=rule.get_attr("FRA_TABLE") or rule["table"],
                    priority=rule.get_attr("FRA_PRIORITY") or 0,
                )


@contextlib.contextmanager
def _unless_present() -> Iterator[None]:
    # Set up already (a second start over a tap that survived): the goal is reached.
    try:
        yield
    except NetlinkError as err:
        if err.code != errno.EEXIST:
            raise


@contextlib.contextmanager
def _unless_gone() -> Iterator[None]:
    # Removed meanwhile (QEMU exited, another cleanup): the goal is reached.
    try:
        yield
    except NetlinkError as err:
        if err.code not in (errno.ENODEV, errno.ENOENT):
            raise
