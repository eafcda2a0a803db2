"""Node calls of the etcd members noded runs on master candidates
(:mod:`corral.node.etcd_member`); the master decides who is a member
(:mod:`corral.services.etcd_reconciler`)."""

# The bodies are the signatures' only: mypy must not ask them for a result.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral.rpc.declare import CHANGES, READS, RESCUES, node_call


@node_call(C.RPC_TMO_URGENT, effect=CHANGES, cluster_client_only=True)
def etcd_member_start(
    name: str, client_port: int, peer_port: int, initial_cluster: dict[str, str], new: bool
) -> dict[str, Any]:
    """Run this node's etcd member ``name`` on the node's primary IP, with
    ``initial_cluster`` (member name: peer URL) as the cluster it forms
    (``new``) or joins; kept running across noded restarts.  Its status."""


@node_call(C.RPC_TMO_URGENT, effect=CHANGES, cluster_client_only=True)
def etcd_member_stop(forget: bool) -> None:
    """Stop this node's etcd member; ``forget``: remove its data too (it is
    no longer a member)."""


@node_call(C.RPC_TMO_URGENT, effect=RESCUES, cluster_client_only=True)
def etcd_member_force_new() -> dict[str, Any]:
    """Restart this node's etcd member as the only member of its cluster, with
    its own copy of the data (``master-failover --no-voting``: the other
    members are lost); its status."""


@node_call(C.RPC_TMO_FAST, effect=READS)
def etcd_member_status() -> dict[str, Any]:
    """Whether this node runs an etcd member: its name, client URL, pid."""


@node_call(C.RPC_TMO_URGENT, effect=CHANGES, cluster_client_only=True)
def candidate_files_put(files: dict[str, Any] | None) -> None:
    """Give this master candidate what it needs to become the master: where
    the master's stores live (``store_home``: its masterd then stands by),
    the cluster CA's key (``ca_key``) and masterd's client certificate
    (``client_pem``); None: take them away (the node is no candidate)."""
