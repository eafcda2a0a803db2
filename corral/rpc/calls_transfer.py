"""The node RPC calls of a disk copy between two nodes (``gnt-instance move``).

The master asks the target to prepare (``transfer_prepare``: create the
disks, register a one-time transfer id), then the source to send
(``transfer_send``: the source noded streams each disk to the target noded
over mutual TLS); it follows the copy with ``transfer_status`` on the source
and ends it with ``transfer_finish`` on both (``success=False``: cancel the
sending, remove the target's partial disks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from corral import constants as C
from corral.rpc.calls import RpcCall


def _status_timeout(args: Sequence[Any]) -> float:
    # The call waits up to ``wait`` seconds for the copy to end.
    try:
        return float(args[1]) + C.RPC_TMO_URGENT
    except (TypeError, ValueError, IndexError):
        return float(C.RPC_TMO_URGENT)


TRANSFER_CALLS = (
    RpcCall(
        "transfer_prepare",
        C.RPC_TMO_NORMAL,
        ("transfer_id", "disks", "ttl"),
        "On the target: create the disks and accept one transfer of them",
    ),
    RpcCall(
        "transfer_send",
        C.RPC_TMO_FAST,
        ("transfer_id", "target", "disks"),
        "On the source: start streaming the disks to the target node",
    ),
    RpcCall(
        "transfer_status",
        _status_timeout,
        ("transfer_id", "wait"),
        "On the source: the copy's progress (waits up to ``wait`` s for its end)",
    ),
    RpcCall(
        "transfer_finish",
        C.RPC_TMO_NORMAL,
        ("transfer_id", "success"),
        "End a transfer: keep the received disks, or cancel and remove them",
    ),
)
