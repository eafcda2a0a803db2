"""Node parameters: their types, and a change to a node's or group's own
values checked as Ganeti checks it (GetUpdatedParams, then ForceDictType)."""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral import errors
from corral import params as P
from corral.objects import Cluster, Node, NodeGroup
from corral.paramtypes import force_dict_type

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
# Set for the whole cluster or a group, never for one node (Ganeti's NDC_GLOBALS).
ND_GLOBALS = frozenset({"exclusive_storage"})
VALUE_DEFAULT = "default"


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
