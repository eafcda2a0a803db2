"""Node calls of node membership: ssconf files and the watcher's pause on
every node, leaving the candidate pool, leaving the cluster."""

# The bodies are the signatures' only: mypy must not ask them for a result.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from corral import constants as C
from corral.rpc.declare import CHANGES, node_call


@node_call(C.RPC_TMO_FAST, effect=CHANGES)
def write_ssconf_files(values: dict[str, str]) -> None:
    """Write the ssconf files (key: content) the master sends."""


@node_call(C.RPC_TMO_FAST, effect=CHANGES)
def set_watcher_pause(until: float | None) -> None:
    """Keep the watcher's pause (until ``until``, an epoch time; None: no
    pause) for the node's watcher (Ganeti's call of that name)."""


@node_call(C.RPC_TMO_URGENT, effect=CHANGES)
def node_leave_cluster() -> None:
    """Remove the cluster files and wait to join a cluster again."""


@node_call(C.RPC_TMO_FAST, effect=CHANGES)
def node_demote_from_mc() -> None:
    """Remove the files only master candidates keep (the node is no longer one)."""
