"""Instance communication (Ganeti 3.0.2's): the cluster's communication
network, created and connected to every node group when it is set, and the
extra NIC of instances that ask for it.

The NIC is named ``ganeti:communication:<instance>``, takes a generated MAC
and an address from the network's pool; the network is 169.254.0.0/16 (and
fe80::/10) with no gateway and MAC prefix 52:54:00, connected in routed mode
with the link ``communication_rt``.  Creating and connecting are follow-up
jobs, as in Ganeti (its ResultWithJobs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral.objects import Instance, Network, NodeGroup
from corral.opcodes.base import OpCode
from corral.opcodes.network import OpNetworkAdd, OpNetworkConnect

if TYPE_CHECKING:
    from corral.config.manager import ConfigManager


def nic_name(instance_name: str) -> str:
    """The name of the communication NIC of ``instance_name`` (Ganeti's
    ComputeInstanceCommunicationNIC)."""
    return C.INSTANCE_COMMUNICATION_NIC_PREFIX + instance_name


def nic_params(cfg: ConfigManager, instance_name: str) -> dict[str, Any]:
    """The NIC a communicating instance gets: on the cluster's communication
    network (the empty name when there is none: refused as an unknown network)."""
    return {
        "name": nic_name(instance_name),
        "mac": C.VALUE_GENERATE,
        "ip": C.NIC_IP_POOL,
        "network": cfg.cluster.instance_communication_network,
    }


def with_communication_nic(cfg: ConfigManager, instance_name: str, nics: list[Any]) -> None:
    """Append the communication NIC to a new instance's ``nics`` unless one of
    them has its name already (Ganeti keeps that one)."""
    name = nic_name(instance_name)
    if not any(isinstance(nic, dict) and nic.get("name") == name for nic in nics):
        nics.append(nic_params(cfg, instance_name))


def nic_change(cfg: ConfigManager, enable: bool, instance: Instance) -> list[Any] | None:
    """The NIC modification that adds or removes ``instance``'s communication
    NIC (Ganeti's _InstanceCommunicationDDM); None when it is as asked."""
    name = nic_name(instance.name)
    present = any(nic.name == name for nic in instance.nics)
    if enable and not present:
        return ["add", -1, nic_params(cfg, instance.name)]
    if not enable and present:
        return ["remove", name, {}]
    return None


def network_warnings(network: Network) -> list[str]:
    """Ganeti's security warnings about a network chosen for instance
    communication whose settings are not the advisable ones."""
    checks = [
        ("has an IPv4 gateway", network.gateway, None),
        ("has a non-standard IPv4 network address", network.network,
         C.INSTANCE_COMMUNICATION_NETWORK4),
        ("has an IPv6 gateway", network.gateway6, None),
        ("has a non-standard IPv6 network address", network.network6,
         C.INSTANCE_COMMUNICATION_NETWORK6),
        ("has a non-standard MAC prefix", network.mac_prefix,
         C.INSTANCE_COMMUNICATION_MAC_PREFIX),
    ]  # fmt: skip
    return [
        f"Supplied instance communication network '{network.name}' {what} '{value}',"
        f" this might pose a security risk (default is '{default}')."
        for what, value, default in checks
        if value != default
    ]


def add_network_op(name: str) -> OpNetworkAdd:
    """The opcode that creates the communication network ``name``."""
    return OpNetworkAdd(
        network_name=name,
        network=C.INSTANCE_COMMUNICATION_NETWORK4,
        network6=C.INSTANCE_COMMUNICATION_NETWORK6,
        mac_prefix=C.INSTANCE_COMMUNICATION_MAC_PREFIX,
        conflicts_check=True,
    )


def connect_op(group_uuid: str, name: str) -> OpNetworkConnect:
    """The opcode that connects group ``group_uuid`` to the communication network."""
    return OpNetworkConnect(
        group_name=group_uuid,
        network_name=name,
        network_mode=C.INSTANCE_COMMUNICATION_NETWORK_MODE,
        network_link=C.INSTANCE_COMMUNICATION_NETWORK_LINK,
        conflicts_check=True,
    )


def ensure_network_jobs(cfg: ConfigManager, name: str) -> list[list[OpCode]]:
    """One job that creates the network ``name`` if missing and connects it to
    every group not connected yet (none when nothing is missing)."""
    network = find_network(cfg, name)
    ops: list[OpCode] = [] if network is not None else [add_network_op(name)]
    for group in cfg.groups():
        if network is None or network.uuid not in group.networks:
            ops.append(connect_op(group.uuid, name))
    return [ops] if ops else []


def change_network(
    cfg: ConfigManager, current: str, name: str, feedback: Callable[[str], None]
) -> list[list[OpCode]]:
    """The jobs that create and connect ``name`` ("" for none), replacing the
    communication network ``current``, with Ganeti's messages."""
    if name == current:
        feedback(f"Instance communication network already is '{name}', nothing to do.")
        return []
    if current and find_network(cfg, current) is not None:
        feedback(f"Previous instance communication network '{current}' should be removed manually.")
    if not name:
        feedback("Disabling instance communication network, only new instances will be affected.")
        return []
    feedback(
        f"Changing instance communication network to '{name}', only new instances will be affected."
    )
    return ensure_network_jobs(cfg, name)


def find_network(cfg: ConfigManager, name_or_uuid: str) -> Network | None:
    """The network named so (or with this uuid), or None (Ganeti's LookupNetwork)."""
    return cfg.find(Network, name_or_uuid) or cfg.get(Network, name_or_uuid)


def group_jobs(cfg: ConfigManager, group: NodeGroup) -> list[list[OpCode]]:
    """The job that connects a new group to the communication network, if it exists."""
    name = cfg.cluster.instance_communication_network
    if name and find_network(cfg, name) is not None:
        return [[connect_op(group.uuid, name)]]
    return []
