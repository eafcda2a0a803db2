"""The network devices of a node's instances: tap devices, bridges, routes.

noded's kvm hypervisor gives each NIC of a starting guest a tap
(:func:`tap_name`, :func:`create_tap`), connects it (:func:`configure_nic`,
or :func:`configure_communication` for an instance communication NIC)
and removes it at stop (:func:`remove_tap`); :func:`list_taps` finds them
after a crash, :func:`bridge_problem` checks a bridge for migration targets
and ``gnt-cluster verify``.  All but :func:`tap_name` and :func:`create_tap`
talk netlink and must run in a thread (``asyncio.to_thread``), never on the
event loop.
"""

from corral.node.netdev.nic import (
    MODE_BRIDGED,
    MODE_OVS,
    MODE_ROUTED,
    bridge_problem,
    configure_communication,
    configure_nic,
    list_taps,
    remove_tap,
)
from corral.node.netdev.tap import TAP_PREFIX, Tap, create_tap, tap_name

__all__ = [
    "MODE_BRIDGED",
    "MODE_OVS",
    "MODE_ROUTED",
    "TAP_PREFIX",
    "Tap",
    "bridge_problem",
    "configure_communication",
    "configure_nic",
    "create_tap",
    "list_taps",
    "remove_tap",
    "tap_name",
]
