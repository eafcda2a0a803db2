"""NICs on networks (Ganeti's rules, for creating and for changing instances).

A NIC on a network takes its NIC parameters from the network's connection
to its node's group, its IP from the network's pool (``ip=pool``) or one of
the network's addresses that is free, and its MAC from the network's prefix
if it has one.  An address a job takes is reserved (``Reservations``, kind
``ip``, per network) until the job ends; by then the instance holds it in
the configuration, or does not.  A NIC on no network must not take an
address of a network connected to its node's group.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors
from corral import params as P
from corral.cmdlib import instance_utils as U
from corral.netpool import AddressPool, AddressPoolError, network_pool
from corral.objects import NIC, Network, Node, NodeGroup
from corral.storage.strategy import Resource

if TYPE_CHECKING:
    from corral.cmdlib.base import LogicalUnit
    from corral.config.manager import ConfigManager

# The kind of the addresses jobs reserve in the configuration's Reservations
# (their "node" is the network's uuid).
RES_IP = "ip"
NIC_KEYS = frozenset({"mac", "ip", "mode", "link", "vlan", "name", "network"})
AUTO = "auto"


def parse_nic(idx: int, spec: dict[str, Any]) -> dict[str, Any]:
    """A checked NIC specification: MAC ("auto", "generate" or one), IP (None,
    "auto", "pool" or one), name, network (as named; None for none) and the
    NIC parameters given."""
    unknown = set(spec) - NIC_KEYS
    if unknown:
        raise errors.OpPrereqError(
            f"NIC {idx}: unknown parameter(s) {', '.join(sorted(unknown))}", C.ECODE_INVAL
        )
    mac = str(spec.get("mac") or AUTO).lower()
    if mac not in (AUTO, "generate"):
        mac = U.check_mac(mac)
    ip = spec.get("ip")
    if ip is None or str(ip).lower() in ("", C.VALUE_NONE):
        ip = None
    elif str(ip).lower() in (AUTO, C.NIC_IP_POOL):
        ip = str(ip).lower()
    else:
        try:
            ip = str(ipaddress.ip_address(ip))
        except ValueError:
            raise errors.OpPrereqError(
                f"NIC {idx}: invalid IP address '{ip}'", C.ECODE_INVAL
            ) from None
    nicparams = {k: spec[k] for k in ("mode", "link", "vlan") if spec.get(k) is not None}
    mode = nicparams.get("mode")
    if mode is not None and mode not in P.NIC_MODES:
        raise errors.OpPrereqError(
            f"NIC {idx}: invalid mode '{mode}' (one of {', '.join(P.NIC_MODES)})", C.ECODE_INVAL
        )
    network = spec.get("network")
    if network is not None and str(network).lower() == C.VALUE_NONE:
        network = None
    return {
        "mac": mac,
        "ip": ip,
        "name": spec.get("name") or None,
        "network": network,
        "nicparams": {k: str(v) for k, v in nicparams.items()},
    }


def check_new_nic(idx: int, spec: dict[str, Any], default_mode: str) -> None:
    """What a NIC of a new instance must satisfy (Ganeti's ComputeNics)."""
    if spec["network"] is not None and ({"mode", "link"} & set(spec["nicparams"])):
        raise errors.OpPrereqError(
            "If network is given, no mode or link is allowed to be passed", C.ECODE_INVAL
        )
    if spec["ip"] == C.NIC_IP_POOL and spec["network"] is None:
        raise errors.OpPrereqError(
            "if ip=pool, parameter network must be passed too", C.ECODE_INVAL
        )
    mode = spec["nicparams"].get("mode", default_mode)
    if mode == "routed" and spec["ip"] is None and spec["network"] is None:
        raise errors.OpPrereqError(
            "Routed nic mode requires an ip address if not attached to a network", C.ECODE_INVAL
        )


def lookup_network(cfg: ConfigManager, value: str | None) -> Network | None:
    """The network a NIC names (by name or uuid); None for none or "none"."""
    if value is None or value.lower() == C.VALUE_NONE:
        return None
    return cfg.lookup(Network, value)


def connection(cfg: ConfigManager, network: Network, node_uuid: str) -> dict[str, Any] | None:
    """The NIC parameters of ``network``'s connection to the node's group (None:
    not connected)."""
    node = cfg.get(Node, node_uuid)
    group = cfg.get(NodeGroup, node.group) if node is not None else None
    if group is None:
        return None
    params = group.networks.get(network.uuid)
    return None if params is None else dict(params)


def check_conflicting_ip(cfg: ConfigManager, ip: str | None, node_uuid: str) -> None:
    """Refuse, for a NIC on no network, an address of a network connected to
    the node's group (Ganeti's CheckForConflictingIp)."""
    node = cfg.get(Node, node_uuid)
    group = cfg.get(NodeGroup, node.group) if node is not None else None
    if ip is None or group is None:
        return
    for uuid in group.networks:
        network = cfg.get(Network, uuid)
        if network is not None and AddressPool(network).contains(ip):
            raise errors.OpPrereqError(
                f"The requested IP address ({ip}) belongs to network {network.name},"
                " but the target NIC does not.",
                C.ECODE_STATE,
            )


def mac_prefix(cfg: ConfigManager, network: Network | None) -> str:
    """The prefix of a new MAC: the network's, else the cluster's."""
    if network is not None and network.mac_prefix:
        return network.mac_prefix
    return cfg.cluster.mac_prefix


class AddressClaims:
    """The addresses one job takes from networks for one instance."""

    def __init__(self, lu: LogicalUnit[Any], instance: str) -> None:
        self._cfg = lu.cfg
        self._job = str(lu.ctx.job_id)
        self._instance = instance
        self._mine: set[Resource] = set()

    def _reserve(self, network: Network, ip: str) -> None:
        resource = Resource(RES_IP, ip, network.uuid)
        self._cfg.reservations.reserve(resource, self._job, self._instance)
        self._mine.add(resource)

    def from_pool(self, network: Network) -> str | None:
        """The first free address of the network, reserved (None: the pool is full)."""
        taken = self._cfg.reservations.values(RES_IP, network.uuid)
        ip = network_pool(self._cfg, network).first_free(str(v) for v in taken)
        if ip is not None:
            self._reserve(network, ip)
        return ip

    def take(self, network: Network, ip: str, check_external: bool) -> bool:
        """Reserve ``ip`` of the network if no instance uses it, no other job
        (nor another NIC of this one) took it and (``check_external``) it is
        not reserved externally."""
        pool = network_pool(self._cfg, network)
        try:
            busy = pool.is_reserved(ip) or (check_external and pool.is_reserved(ip, True))
        except AddressPoolError:  # not an address of the network
            return False
        resource = Resource(RES_IP, ip, network.uuid)
        if busy or resource in self._mine or self._cfg.reservations.reserver(resource, self._job):
            return False
        self._reserve(network, ip)
        return True


class NicEditor:
    """Adds and changes the NICs of one instance on its primary node
    (Ganeti's _PrepareNicModification); ``changes`` says what it did."""

    def __init__(self, lu: LogicalUnit[Any], instance: str, pnode: str) -> None:
        self._lu = lu
        self._cfg = lu.cfg
        self._pnode = pnode
        self._instance = instance
        self._check = bool(lu.op.conflicts_check)
        self.taken = self._cfg.used_macs()
        self._claims = AddressClaims(lu, instance)
        self.changes: list[list[Any]] = []

    def add(self, index: int, params: dict[str, Any]) -> NIC:
        """A new NIC (``index``: its position in the instance's NICs)."""
        spec = self._spec(index, params, adding=True)
        nic = NIC(mac=AUTO, ip=None, name=spec["name"])
        network = self._update(nic, spec, params)
        filled = P.fill(P.NIC_DEFAULTS, self._cfg.cluster.nicparams.get("default", {}),
                        nic.nicparams)  # fmt: skip
        net = params.get("network") if network is not None else None
        self.changes.append([f"nic.{index}", f"add:mac={nic.mac},ip={nic.ip},mode={filled['mode']},"
                             f"link={filled['link']},network={net}"])  # fmt: skip
        return nic

    def modify(self, index: int, nic: NIC, params: dict[str, Any]) -> None:
        """Change ``nic`` (a copy: the instance's ``index``-th NIC) as ``params`` say."""
        spec = self._spec(index, params, adding=False)
        old_network = nic.network
        self._update(nic, spec, params)
        for key in ("mac", "ip", "name"):
            if key in params:
                self.changes.append([f"nic.{key}/{index}", getattr(nic, key)])
        if nic.network != old_network:
            name = None if nic.network is None else params.get("network")
            self.changes.append([f"nic.network/{index}", name])
        if nic.network is not None and nic.network != old_network:
            self.changes += [[f"nic.{k}/{index}", v] for k, v in nic.nicparams.items()]
        else:
            self.changes += [[f"nic.{k}/{index}", v] for k, v in spec["nicparams"].items()]

    def _spec(self, index: int, params: dict[str, Any], *, adding: bool) -> dict[str, Any]:
        """The checked parameters (Ganeti's _VerifyNicModification)."""
        spec = parse_nic(index, params)
        if spec["network"] is not None and ({"mode", "link"} & set(spec["nicparams"])):
            raise errors.OpPrereqError("If network is given mode or link should not", C.ECODE_INVAL)
        if adding and spec["ip"] == C.NIC_IP_POOL and spec["network"] is None:
            raise errors.OpPrereqError(
                "If ip=pool, parameter network cannot be none", C.ECODE_INVAL
            )
        if spec["ip"] == AUTO:
            # Only a new instance has a resolved name to take the address from.
            raise errors.OpPrereqError(
                f"NIC {index}: invalid IP address 'auto' (give an address or 'none')",
                C.ECODE_INVAL,
            )
        if not adding and params.get("mac") == AUTO:
            raise errors.OpPrereqError(
                "'auto' is not a valid MAC address when modifying an existing NIC", C.ECODE_INVAL
            )
        return spec

    def _update(self, nic: NIC, spec: dict[str, Any], params: dict[str, Any]) -> Network | None:
        """Apply network, NIC parameters, MAC and IP to ``nic``; its new network."""
        old_network = self._cfg.get(Network, nic.network) if nic.network else None
        network = lookup_network(self._cfg, spec["network"]) if "network" in params else old_network
        if network is not None:
            netparams = connection(self._cfg, network, self._pnode)
            if netparams is None:
                raise errors.OpPrereqError(
                    f"No netparams found for the network {network.name}, probably not connected",
                    C.ECODE_INVAL,
                )
            nicparams = netparams
        else:
            nicparams = {**nic.nicparams, **spec["nicparams"]}
        ip = spec["ip"] if "ip" in params else nic.ip
        filled = P.fill(P.NIC_DEFAULTS, self._cfg.cluster.nicparams.get("default", {}), nicparams)
        if filled["mode"] == "routed" and ip is None and network is None:
            raise errors.OpPrereqError(
                "Cannot set the NIC IP address to None on a routed NIC if not attached to a"
                " network",
                C.ECODE_INVAL,
            )
        self._update_mac(nic, spec, params, old_network, network)
        new_uuid = None if network is None else network.uuid
        if (ip, new_uuid) != (nic.ip, nic.network):
            ip = self._new_ip(ip, network)
        elif nic.network is not None and {"mode", "link"} & set(spec["nicparams"]):
            raise errors.OpPrereqError(
                "Not allowed to change link or mode of a NIC that is connected to a network",
                C.ECODE_INVAL,
            )
        nic.ip, nic.network, nic.nicparams = ip, new_uuid, nicparams
        return network

    def _update_mac(
        self,
        nic: NIC,
        spec: dict[str, Any],
        params: dict[str, Any],
        old: Network | None,
        new: Network | None,
    ) -> None:
        """A MAC given is checked; "generate" (or a new network's other prefix) makes one."""
        if "mac" in params and spec["mac"] not in (AUTO, "generate"):
            if spec["mac"] in self.taken and spec["mac"] != nic.mac:
                raise errors.OpPrereqError(
                    f"MAC address '{spec['mac']}' already in use in cluster", C.ECODE_NOTUNIQUE
                )
            self.taken.add(spec["mac"])
            nic.mac = spec["mac"]
        elif (
            "mac" in params
            or nic.mac == AUTO
            or mac_prefix(self._cfg, old) != mac_prefix(self._cfg, new)
        ):
            nic.mac = U.generate_mac(mac_prefix(self._cfg, new), self.taken)

    def _new_ip(self, ip: str | None, network: Network | None) -> str | None:
        """The NIC's new address, taken from ``network`` if it has one."""
        if ip is None:
            return None
        if ip == C.NIC_IP_POOL:
            if network is None:
                raise errors.OpPrereqError("ip=pool, but no network found", C.ECODE_INVAL)
            ip = self._claims.from_pool(network)
            if ip is None:
                raise errors.OpPrereqError(
                    "Unable to get a free IP from the address pool", C.ECODE_STATE
                )
            self._lu.log_info(f"Chose IP {ip} from network {network.name}")
        elif network is not None:
            if not self._claims.take(network, ip, self._check):
                raise errors.OpPrereqError(
                    f"IP {ip} not available in network {network.name}", C.ECODE_NOTUNIQUE
                )
            self._lu.log_info(f"Reserving IP {ip} in network {network.name}")
        elif self._check:
            check_conflicting_ip(self._cfg, ip, self._pnode)
            owner = self._cfg.ip_owner(ip)
            if owner is not None and owner != self._instance:
                raise errors.OpPrereqError(
                    f"IP address {ip} is already used by instance {owner}", C.ECODE_NOTUNIQUE
                )
        return ip
