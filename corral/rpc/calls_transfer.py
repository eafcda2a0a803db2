"""The node RPC calls of a disk copy between two nodes (``gnt-instance move``).

The master asks the target to prepare (``transfer_prepare``: create the
disks, record them under a one-time transfer id), copies the bytes with the
import/export calls (:mod:`corral.rpc.calls_impexp`), renews the transfer
meanwhile (``transfer_touch``) and ends it with ``transfer_finish``
(``success=False``: remove the target's partial disks).
"""

from __future__ import annotations

from corral import constants as C
from corral.rpc.calls import RpcCall

TRANSFER_CALLS = (
    RpcCall(
        "transfer_prepare",
        C.RPC_TMO_NORMAL,
        ("transfer_id", "disks", "ttl"),
        "On the target: create the disks and accept one transfer of them",
    ),
    RpcCall(
        "transfer_touch",
        C.RPC_TMO_URGENT,
        ("transfer_id",),
        "On the target: the transfer is in use (its time-to-live starts again)",
    ),
    RpcCall(
        "transfer_finish",
        C.RPC_TMO_NORMAL,
        ("transfer_id", "success"),
        "End a transfer: keep the received disks, or remove them",
    ),
)
