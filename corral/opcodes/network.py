"""Network opcodes (Ganeti 3.0.2's fields, types and defaults)."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from corral.opcodes.base import OpCode
from corral.opcodes.types import NonEmptyStr

# Ganeti's NIC modes, "pool" among them (as its type of network_mode has it).
NicMode = Literal["bridged", "routed", "openvswitch", "pool"]


def _checked(parse: Callable[[str], object], what: str) -> AfterValidator:
    def check(value: str) -> str:
        try:
            parse(value)
        except ValueError as err:
            raise ValueError(f"not an {what}: {err}") from None
        return value

    return AfterValidator(check)


# As Ganeti's ht checks: the text is kept as given, once Python's ipaddress
# reads it (a subnet with host bits set is refused).
IPv4Address = Annotated[str, _checked(ipaddress.IPv4Address, "IPv4 address")]
IPv4Network = Annotated[str, _checked(ipaddress.IPv4Network, "IPv4 network")]
IPv6Address = Annotated[str, _checked(ipaddress.IPv6Address, "IPv6 address")]
IPv6Network = Annotated[str, _checked(ipaddress.IPv6Network, "IPv6 network")]


class _NetworkOp(OpCode):
    OP_DSC_FIELD = "network_name"

    network_name: NonEmptyStr


class OpNetworkAdd(_NetworkOp):
    """Add an IP network to the cluster."""

    OP_ID = "OP_NETWORK_ADD"

    network: IPv4Network
    gateway: IPv4Address | None = None
    network6: IPv6Network | None = None
    gateway6: IPv6Address | None = None
    mac_prefix: NonEmptyStr | None = None
    add_reserved_ips: list[IPv4Address] | None = None
    conflicts_check: bool = True
    tags: list[NonEmptyStr] = Field(default_factory=list)


class OpNetworkRemove(_NetworkOp):
    """Remove a network that no node group is connected to."""

    OP_ID = "OP_NETWORK_REMOVE"

    force: bool = False


class OpNetworkSetParams(_NetworkOp):
    """Change a network's gateways, MAC prefix, IPv6 subnet or reservations."""

    OP_ID = "OP_NETWORK_SET_PARAMS"

    gateway: IPv4Address | None = None
    network6: IPv6Network | None = None
    gateway6: IPv6Address | None = None
    mac_prefix: NonEmptyStr | None = None
    add_reserved_ips: list[IPv4Address] | None = None
    remove_reserved_ips: list[IPv4Address] | None = None


class OpNetworkConnect(_NetworkOp):
    """Connect a network to a node group with a NIC mode, link and VLAN."""

    OP_ID = "OP_NETWORK_CONNECT"

    group_name: NonEmptyStr
    network_mode: NicMode
    network_link: NonEmptyStr
    network_vlan: str = ""
    conflicts_check: bool = True


class OpNetworkDisconnect(_NetworkOp):
    """Disconnect a network from a node group."""

    OP_ID = "OP_NETWORK_DISCONNECT"

    group_name: NonEmptyStr
