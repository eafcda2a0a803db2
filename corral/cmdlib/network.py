"""Logical units for IP networks: add, remove, change (``gnt-network``)."""

from __future__ import annotations

import re
from typing import Any

from corral import constants as C
from corral import errors
from corral.cmdlib.base import ALL_SET, LogicalUnit
from corral.cmdlib.tags import check_tag
from corral.netpool import AddressPool, AddressPoolError, network_pool
from corral.nicesort import nice_sort
from corral.objects import Network
from corral.opcodes import network as opn

_MAC_PREFIX_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){2}$", re.IGNORECASE)


def checked_mac_prefix(prefix: str) -> str:
    """``prefix`` in lower case if it is three octets (Ganeti's words otherwise)."""
    if not _MAC_PREFIX_RE.match(prefix):
        raise errors.OpPrereqError(f"Invalid MAC address prefix '{prefix}'", C.ECODE_INVAL)
    return prefix.lower()


def network_hook_env(
    name: str,
    subnet: str | None,
    gateway: str | None,
    network6: str | None,
    gateway6: str | None,
    mac_prefix: str | None,
    tags: list[str],
) -> dict[str, Any]:
    """Ganeti's hook variables of a network: those that have a value."""
    values = {
        "NETWORK_NAME": name,
        "NETWORK_SUBNET": subnet,
        "NETWORK_GATEWAY": gateway,
        "NETWORK_SUBNET6": network6,
        "NETWORK_GATEWAY6": gateway6,
        "NETWORK_MAC_PREFIX": mac_prefix,
        "NETWORK_TAGS": " ".join(sorted(tags)),
    }
    return {key: value for key, value in values.items() if value}


class _NetworkLU(LogicalUnit[Any]):
    """Finds ``op.network_name`` and locks that network; hooks on the master."""

    HTYPE = C.HTYPE_NETWORK
    REQ_BGL = False
    network: Network

    def expand_names(self) -> None:
        self.network = self.expand(Network, self.op.network_name)

    def declare_locks(self) -> None:
        self.needed_locks[C.LEVEL_NETWORK] = [self.network.uuid]

    def current_network(self) -> Network:
        network = self.cfg.get(Network, self.network.uuid)
        if network is None:
            raise errors.OpExecError(
                f"Network '{self.op.network_name}' with UUID {self.network.uuid} disappeared"
            )
        return network

    def build_hooks_nodes(self) -> tuple[list[str], list[str]]:
        master = [self.cfg.cluster.master_node]
        return master, master


class LUNetworkAdd(_NetworkLU):
    """Adds a network; its pool reserves the network's own addresses, those
    of the nodes and the master (unless told not to check) and ``add_reserved_ips``."""

    OPCODE = opn.OpNetworkAdd
    HPATH = "network-add"
    # Names are checked when the unit runs: adding networks is serialised by
    # the Big Ganeti Lock (as adding groups).
    REQ_BGL = True

    def check_arguments(self) -> None:
        if self.op.mac_prefix:
            self.op.mac_prefix = checked_mac_prefix(self.op.mac_prefix)

    def expand_names(self) -> None:
        pass

    def declare_locks(self) -> None:
        pass

    async def check_prereq(self) -> None:
        op = self.op
        existing = self.cfg.find(Network, op.network_name)
        if existing is not None:
            raise errors.OpPrereqError(
                f"Desired network name '{op.network_name}' already exists as a network"
                f" (UUID: {existing.uuid})",
                C.ECODE_EXISTS,
            )
        for tag in op.tags:
            check_tag(tag)
        self.network = Network(
            name=op.network_name,
            network=op.network,
            gateway=op.gateway,
            network6=op.network6,
            gateway6=op.gateway6,
            mac_prefix=op.mac_prefix,
            tags=list(dict.fromkeys(op.tags)),
        )
        try:
            self.pool = AddressPool.initialize(self.network)
        except AddressPoolError as err:
            raise errors.OpExecError(
                f"Cannot create IP address pool for network '{op.network_name}': {err}"
            ) from None

    def build_hooks_env(self) -> dict[str, Any]:
        op = self.op
        return network_hook_env(op.network_name, op.network, op.gateway, op.network6,
                                op.gateway6, op.mac_prefix, op.tags)  # fmt: skip

    async def exec(self) -> Any:
        if self.op.conflicts_check:
            self._reserve_cluster_addresses()
        for ip in self.op.add_reserved_ips or []:
            try:
                self.pool.reserve(ip, external=True)
            except AddressPoolError as err:
                raise errors.OpExecError(f"Cannot reserve IP address '{ip}': {err}") from None
        self.network.ext_reservations = self.pool.external_addresses()
        self.tx.add(self.network)
        return None

    def _reserve_cluster_addresses(self) -> None:
        """The nodes' and the master's addresses: no instance may take them."""
        pool = self.pool
        for node in self.cfg.nodes():
            for ip in (node.primary_ip, node.secondary_ip):
                if not pool.contains(ip):
                    continue
                try:
                    pool.reserve(ip, external=True)
                    self.log_info(f"Reserved IP address of node '{node.name}' ({ip})")
                except AddressPoolError as err:
                    self.warn(f"Cannot reserve IP address '{ip}' of node '{node.name}': {err}")
        master_ip = self.cfg.cluster.master_ip
        if pool.contains(master_ip):
            try:
                pool.reserve(master_ip, external=True)
                self.log_info(f"Reserved cluster master IP address ({master_ip})")
            except AddressPoolError as err:
                self.warn(f"Cannot reserve cluster master IP address ({master_ip}): {err}")


class LUNetworkRemove(_NetworkLU):
    """Removes a network no node group is connected to."""

    OPCODE = opn.OpNetworkRemove
    HPATH = "network-remove"

    def declare_locks(self) -> None:
        super().declare_locks()
        self.needed_locks[C.LEVEL_NODEGROUP] = ALL_SET
        self.share_locks[C.LEVEL_NODEGROUP] = True

    async def check_prereq(self) -> None:
        self.network = self.current_network()
        groups = [g.name for g in self.cfg.groups() if self.network.uuid in g.networks]
        if groups:
            self.warn(
                f"Network '{self.op.network_name}' is connected to the following node"
                f" groups: {', '.join(nice_sort(groups))}"
            )
            raise errors.OpPrereqError("Network still connected", C.ECODE_STATE)

    def build_hooks_env(self) -> dict[str, Any]:
        return {"NETWORK_NAME": self.op.network_name}

    async def exec(self) -> Any:
        self.tx.remove(self.current_network())
        return None


class LUNetworkSetParams(_NetworkLU):
    """Changes a network's gateway, MAC prefix, IPv6 subnet and gateway, and
    its external reservations (an address that cannot be reserved or released
    is a warning, as in Ganeti)."""

    OPCODE = opn.OpNetworkSetParams
    HPATH = "network-modify"

    def check_arguments(self) -> None:
        op = self.op
        if op.gateway and (op.add_reserved_ips or op.remove_reserved_ips):
            raise errors.OpPrereqError(
                "Cannot modify gateway and reserved ips at once", C.ECODE_INVAL
            )

    async def check_prereq(self) -> None:
        op = self.op
        self.network = self.current_network()
        self.pool = network_pool(self.cfg, self.network)
        self.gateway = self.network.gateway
        if op.gateway:
            self.gateway = op.gateway
            self._check_gateway(op.gateway)
        self.mac_prefix = self.network.mac_prefix
        if op.mac_prefix:
            none = op.mac_prefix == C.VALUE_NONE
            self.mac_prefix = None if none else checked_mac_prefix(op.mac_prefix)

    def _check_gateway(self, gateway: str) -> None:
        try:
            used = self.pool.is_reserved(gateway)
        except AddressPoolError as err:
            raise errors.OpPrereqError(str(err), C.ECODE_INVAL) from None
        if used:
            raise errors.OpPrereqError(
                f"Gateway IP address '{gateway}' is already reserved", C.ECODE_STATE
            )
        if gateway != self.network.gateway and self.pool.is_reserved(gateway, external=True):
            # Ganeti fails here later, unhandled, having checked only instances.
            raise errors.OpPrereqError(
                f"Gateway IP address '{gateway}' is already externally reserved", C.ECODE_STATE
            )

    def build_hooks_env(self) -> dict[str, Any]:
        op, net = self.op, self.network
        return network_hook_env(
            op.network_name,
            net.network,
            self.gateway,
            op.network6 or net.network6,
            op.gateway6 or net.gateway6,
            self.mac_prefix,
            net.tags,
        )

    async def exec(self) -> Any:
        op = self.op
        network = self.network.copy_for_update()
        assert isinstance(network, Network)
        if op.gateway:
            self._change_gateway(network)
        for ip in op.add_reserved_ips or []:
            try:
                self.pool.reserve(ip, external=True)
            except AddressPoolError as err:
                self.warn(f"Cannot reserve IP address {ip}: {err}")
        for ip in op.remove_reserved_ips or []:
            if ip == network.gateway:
                self.warn("Cannot unreserve Gateway's IP")
                continue
            try:
                self.pool.release(ip, external=True)
            except AddressPoolError as err:
                self.warn(f"Cannot release IP address {ip}: {err}")
        network.ext_reservations = self.pool.external_addresses()
        if op.mac_prefix:
            network.mac_prefix = self.mac_prefix
        if op.network6:
            network.network6 = op.network6
        if op.gateway6:
            network.gateway6 = op.gateway6
        self.tx.update(network)
        return None

    def _change_gateway(self, network: Network) -> None:
        if self.gateway == network.gateway:
            self.warn(f"Gateway is already {self.gateway}")
            return
        assert self.gateway is not None
        self.pool.reserve(self.gateway, external=True)
        if network.gateway:
            self.pool.release(network.gateway, external=True)
        network.gateway = self.gateway
