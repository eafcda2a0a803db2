"""Node calls of the etcd members noded runs on master candidates
(:mod:`corral.node.etcd_member`); the master decides who is a member
(:mod:`corral.services.etcd_reconciler`)."""

# The bodies are the signatures' only: mypy must not ask them for a result.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral.rpc.declare import CHANGES, READS, node_call


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


@node_call(C.RPC_TMO_FAST, effect=READS)
def etcd_member_status() -> dict[str, Any]:
    """Whether this node runs an etcd member: its name, client URL, pid."""


@node_call(C.RPC_TMO_URGENT, effect=CHANGES, cluster_client_only=True)
def store_home_put(home: dict[str, Any] | None) -> None:
    """Write where the master's stores live (``store-home.json``: the etcd key
    prefix and members) on this master candidate, whose masterd stands by
    with them; None: remove it (the node is no candidate any more)."""
