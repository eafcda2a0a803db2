"""IP networks (``gnt-network``): a subnet with its pool of addresses.

A network keeps the addresses reserved outside Ganeti ("external"
reservations: its network and broadcast addresses, its gateway, what an
administrator reserves).  The addresses its instances use are not stored
here: they are the IPs of the NICs on the network, so removing a NIC or an
instance frees its address by itself (see :mod:`corral.netpool`).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from corral.objects.base import ConfigObject


class Network(ConfigObject):
    """One network; node groups connect to it with a NIC mode and link."""

    TABLE: ClassVar[str] = "networks"

    # The IPv4 subnet as it was given ("10.1.0.0/24").
    network: str
    gateway: str | None = None
    network6: str | None = None
    gateway6: str | None = None
    # Overrides the cluster's MAC prefix for the NICs on this network.
    mac_prefix: str | None = None
    # Externally reserved addresses, in address order.
    ext_reservations: list[str] = Field(default_factory=list)
