"""Node calls of ``gnt-cluster command`` and ``copyfile``: the master's root
acting as root on every node, as Ganeti's root ssh does.

Only the cluster's client certificate may make them (see
:mod:`corral.node.peer`): a node's own certificate, which every node holds,
does not give root on the others.  noded logs every use.
"""

# The bodies are the signatures' only: mypy must not ask them for a result.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from corral import constants as C
from corral.rpc.declare import CHANGES, node_call
from corral.rpc.wire import CommandResult


@node_call(C.CLUSTER_COMMAND_CALL_TIMEOUT, effect=CHANGES, cluster_client_only=True)
def run_command(command: str) -> CommandResult:
    """Run ``command`` with ``/bin/sh -c`` in a clean login-like environment,
    standard input empty; its output (each stream bounded) and exit code."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES, cluster_client_only=True)
def copy_file(file_name: str, in_root: bool, data: str, mode: int, atime: int, mtime: int) -> None:
    """Write ``data`` (base64) to the absolute path ``file_name`` with ``mode``
    and times, as ``scp -p`` does; ``in_root``: the path is below the
    master's root, and lands below this node's (test clusters on one machine)."""
