"""A network's pool of IPv4 addresses, as Ganeti's ``AddressPool``.

Each address of the subnet is free, reserved externally (kept in the
network object: its network and broadcast addresses, its gateway, what an
administrator reserves) or used by an instance (a NIC on the network has it;
the configuration's instances say which).  The messages are Ganeti's.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from corral.objects.network import Network

if TYPE_CHECKING:
    from corral.config.manager import ConfigManager

# The smallest and the largest subnets a pool may have (Ganeti's limits: a
# bigger pool was too slow for its bitmaps).
IPV4_MIN_PREFIX = 30
IPV4_MAX_PREFIX = 16


class AddressPoolError(Exception):
    """An address cannot be reserved or released (Ganeti's AddressPoolError)."""


def parse_subnet(text: str) -> ipaddress.IPv4Network:
    """The subnet ``text`` names; AddressPoolError if a pool cannot have its size."""
    subnet = ipaddress.IPv4Network(text)
    hosts = subnet.num_addresses
    if hosts > 2 ** (32 - IPV4_MAX_PREFIX):
        raise AddressPoolError(
            f"A big network with {hosts} host(s) is currently not supported."
            f" please specify at most a /{IPV4_MAX_PREFIX} network"
        )
    if hosts < 2 ** (32 - IPV4_MIN_PREFIX):
        raise AddressPoolError(
            f"A network with only {hosts} host(s) is too small, please specify"
            f" at least a /{IPV4_MIN_PREFIX} network"
        )
    return subnet


class AddressPool:
    """The addresses of ``network``: ``used`` are its instances' NIC IPs."""

    def __init__(self, network: Network, used: Iterable[str] = ()) -> None:
        self.subnet = parse_subnet(network.network)
        self._base = int(self.subnet.network_address)
        self.size = self.subnet.num_addresses
        self.external = {self.index(ip) for ip in network.ext_reservations}
        self.used = {i for i in map(self._offset, used) if 0 <= i < self.size}

    @classmethod
    def initialize(cls, network: Network) -> AddressPool:
        """A new network's pool: its network, broadcast and gateway addresses
        reserved externally (Ganeti's InitializeNetwork)."""
        pool = cls(network)
        pool.external.clear()
        for address in (pool.subnet[0], pool.subnet[-1]):
            pool.reserve(str(address), external=True)
        if network.gateway is not None:
            pool.reserve(network.gateway, external=True)
        return pool

    def _offset(self, address: str) -> int:
        return int(ipaddress.IPv4Address(address)) - self._base

    def contains(self, address: str | None) -> bool:
        """Whether ``address`` (an IP of any version, or None) is in the subnet."""
        if address is None:
            return False
        try:
            return ipaddress.ip_address(address) in self.subnet
        except ValueError:
            return False

    def index(self, address: str) -> int:
        """The position of ``address`` in the subnet."""
        if not self.contains(address):
            raise AddressPoolError(f"{self.subnet} does not contain {address}")
        return self._offset(address)

    def is_reserved(self, address: str, external: bool = False) -> bool:
        """Whether ``address`` is reserved externally, or used by an instance."""
        return self.index(address) in (self.external if external else self.used)

    def reserve(self, address: str, external: bool = False) -> None:
        """Mark ``address`` reserved (external) or used by an instance."""
        if self.is_reserved(address, external):
            if external:
                raise AddressPoolError(f"IP {address} is already externally reserved")
            raise AddressPoolError(f"IP {address} is already used by an instance")
        (self.external if external else self.used).add(self.index(address))

    def release(self, address: str, external: bool = False) -> None:
        """Free ``address`` from its external reservation (or its instance)."""
        if not self.is_reserved(address, external):
            if external:
                raise AddressPoolError(f"IP {address} is not externally reserved")
            raise AddressPoolError(f"IP {address} is not used by an instance")
        (self.external if external else self.used).discard(self.index(address))

    @property
    def reserved_count(self) -> int:
        return len(self.external | self.used)

    @property
    def free_count(self) -> int:
        return self.size - self.reserved_count

    def map(self) -> str:
        """One character per address: ``X`` reserved or used, ``.`` free."""
        return self._cells(self.external | self.used, "X", ".")

    def bitmap(self, external: bool = False) -> str:
        """Ganeti's stored form of one part of the pool: ``1`` for an address
        reserved externally (or used by an instance), ``0`` otherwise."""
        return self._cells(self.external if external else self.used, "1", "0")

    def _cells(self, marked: set[int], on: str, off: str) -> str:
        cells = bytearray(off.encode() * self.size)
        for index in marked:
            cells[index] = ord(on)
        return cells.decode()

    def first_free(self, taken: Iterable[str] = ()) -> str | None:
        """The lowest free address that is not in ``taken`` (None: the pool is full)."""
        busy = self.external | self.used | {self._offset(ip) for ip in taken if self.contains(ip)}
        for index in range(self.size):
            if index not in busy:
                return str(self.subnet[index])
        return None

    def external_addresses(self) -> list[str]:
        """The externally reserved addresses, in address order."""
        return [str(self.subnet[index]) for index in sorted(self.external)]


def network_pool(cfg: ConfigManager, network: Network) -> AddressPool:
    """The pool of ``network``, with the addresses its instances' NICs use."""
    return AddressPool(network, cfg.network_ips(network.uuid))


def network_dict(cfg: ConfigManager, network: Network) -> dict[str, Any]:
    """The network as Ganeti's ``Network.ToDict`` gives it: unset values left
    out, its pool's two parts as bitmaps."""
    pool = network_pool(cfg, network)
    values = {
        "name": network.name,
        "serial_no": network.serial_no,
        "mac_prefix": network.mac_prefix,
        "network": network.network,
        "network6": network.network6,
        "gateway": network.gateway,
        "gateway6": network.gateway6,
        "reservations": pool.bitmap(),
        "ext_reservations": pool.bitmap(external=True),
        "ctime": network.ctime,
        "mtime": network.mtime,
        "uuid": network.uuid,
        "tags": sorted(network.tags),
    }
    return {key: value for key, value in values.items() if value is not None}
