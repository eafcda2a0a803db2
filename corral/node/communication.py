"""Instance communication on a node: which NIC of an instance is its
communication NIC, and which tap and guest address it has here.

A kvm guest's communication NIC (Ganeti's: named
``ganeti:communication:<instance>``, routed, on the cluster's communication
network) gets a tap with 169.254.169.254 on the node's side
(:func:`corral.node.netdev.configure_communication`).  The metadata daemon
answers on those taps and tells guests apart by the tap a request arrives on
and its source address: :func:`communication_tap` gives both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral import constants as C
from corral.node.netdev.tap import tap_name

if TYPE_CHECKING:  # the kvm hypervisor imports this module
    from corral.node.hypervisor.spec import InstanceSpec, NicSpec


def is_communication_nic(nic: NicSpec) -> bool:
    """Whether ``nic`` is an instance communication NIC (Ganeti's test: its
    name has the prefix and its mode is routed)."""
    return (
        bool(nic.name)
        and str(nic.name).startswith(C.INSTANCE_COMMUNICATION_NIC_PREFIX)
        and (nic.mode == C.INSTANCE_COMMUNICATION_NETWORK_MODE)
    )


def communication_tap(spec: InstanceSpec, node: str) -> tuple[str, str] | None:
    """(tap name, guest IP) of the communication NIC of ``spec`` on the node
    whose noded root is ``node`` (as the kvm hypervisor names taps), or None
    when the instance has none (or it has no address yet)."""
    for nic in spec.nics:
        if is_communication_nic(nic) and nic.ip:
            return tap_name(spec.uuid or spec.name, nic.index, node), nic.ip
    return None
