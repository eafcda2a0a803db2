"""Parameter tables behind the query fields: Ganeti's titles of backend and
node parameters, and node parameters' types and defaults.

Ganeti's cluster object always holds every node parameter (its defaults fill
what was never set); Corral stores only what was set, so the queries fill the
rest from ``ND_DEFAULTS`` and show what a Ganeti cluster would.
"""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral import params as P
from corral.objects import Cluster, Node, NodeGroup

# Backend parameters with a title of their own (the others are titled by name).
BE_TITLES: dict[str, str] = {
    "auto_balance": "Auto_balance",
    "maxmem": "ConfigMaxMem",
    "minmem": "ConfigMinMem",
    "vcpus": "ConfigVCPUs",
}

ND_TITLES: dict[str, str] = {
    "exclusive_storage": "ExclusiveStorage",
    "oob_program": "OutOfBandProgram",
    "ovs": "OpenvSwitch",
    "ovs_link": "OpenvSwitchLink",
    "ovs_name": "OpenvSwitchName",
    "spindle_count": "SpindleCount",
}
ND_DEFAULTS: dict[str, Any] = {
    "cpu_speed": 1.0,
    "exclusive_storage": False,
    "oob_program": "",
    "ovs": False,
    "ovs_link": "",
    "ovs_name": "switch1",
    "spindle_count": 1,
    "ssh_port": C.DEFAULT_SSH_PORT,
}


def group_ndparams(cluster: Cluster, group: NodeGroup) -> dict[str, Any]:
    """A group's node parameters: its own over the cluster's."""
    return P.fill(ND_DEFAULTS, cluster.ndparams, group.ndparams)


def node_ndparams(cluster: Cluster, group: NodeGroup, node: Node) -> dict[str, Any]:
    """A node's node parameters: its own over its group's."""
    return P.fill(group_ndparams(cluster, group), node.ndparams)
