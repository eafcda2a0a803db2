"""Node parameters: their types and defaults, a node's filled ones, and a
change to a node's or group's own values checked as Ganeti checks it
(GetUpdatedParams, then ForceDictType).

Ganeti's cluster object always holds every node parameter (its defaults fill
what was never set); Corral stores only what was set, so the rest is filled
from ``ND_DEFAULTS``, and shows what a Ganeti cluster would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral import errors
from corral import params as P
from corral.paramtypes import force_dict_type

if TYPE_CHECKING:
    from corral.objects import Cluster, Node, NodeGroup

ND_TYPES: dict[str, str] = {
    "cpu_speed": "float",
    "exclusive_storage": "bool",
    "oob_program": "string",
    "ovs": "bool",
    "ovs_link": "maybe-string",
    "ovs_name": "maybe-string",
    "spindle_count": "int",
    "ssh_port": "int",
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
# Set for the whole cluster or a group, never for one node (Ganeti's NDC_GLOBALS).
ND_GLOBALS = frozenset({"exclusive_storage"})
VALUE_DEFAULT = "default"


def group_ndparams(cluster: Cluster, group: NodeGroup) -> dict[str, Any]:
    """A group's node parameters: its own over the cluster's."""
    return P.fill(ND_DEFAULTS, cluster.ndparams, group.ndparams)


def node_ndparams(cluster: Cluster, group: NodeGroup, node: Node) -> dict[str, Any]:
    """A node's node parameters: its own over its group's."""
    return P.fill(group_ndparams(cluster, group), node.ndparams)


def updated_ndparams(own: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``own`` with ``changes`` applied ("default" removes a value), typed."""
    new = {k: v for k, v in own.items() if changes.get(k) != VALUE_DEFAULT}
    new.update({k: v for k, v in changes.items() if v != VALUE_DEFAULT})
    try:
        force_dict_type(new, ND_TYPES)
    except errors.TypeEnforcementError as err:
        raise errors.OpPrereqError(f"Invalid node parameters: {err}", C.ECODE_INVAL) from None
    return new


def check_not_global(changes: dict[str, Any]) -> None:
    """Refuse, for one node, the parameters only a cluster or group may set."""
    used = sorted(ND_GLOBALS.intersection(changes))
    if used:
        raise errors.OpPrereqError(
            f"The following node parameters are global and cannot be customized at node"
            f" level, please modify them at cluster or group level: {', '.join(used)}",
            C.ECODE_INVAL,
        )


def ssh_port(cluster: Cluster, group: NodeGroup | None, node: Node) -> Any:
    """The node's ``ssh_port`` parameter: its own over its group's and the cluster's."""
    own = [cluster.ndparams, group.ndparams if group else {}, node.ndparams]
    return P.fill({"ssh_port": C.DEFAULT_SSH_PORT}, *own)["ssh_port"]
