"""The node calls of a disk copy between two nodes (``gnt-instance move``).

The master asks the target to prepare (``transfer_prepare``: create the
disks, record them under a one-time transfer id), copies the bytes with the
import/export calls (:mod:`corral.rpc.calls_impexp`), renews the transfer
meanwhile (``transfer_touch``) and ends it with ``transfer_finish``
(``success=False``: remove the target's partial disks).
"""

# The bodies are the signatures' only: mypy must not ask them for a result.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from corral import constants as C
from corral.rpc.declare import CHANGES, node_call
from corral.rpc.wire import DiskWire, TransferFinished


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def transfer_prepare(transfer_id: str, disks: list[DiskWire], ttl: float) -> None:
    """On the target: create the disks and accept one transfer of them."""


@node_call(C.RPC_TMO_URGENT, effect=CHANGES)
def transfer_touch(transfer_id: str) -> bool:
    """On the target: the transfer is in use (its time-to-live starts again);
    whether it is known."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def transfer_finish(transfer_id: str, success: bool) -> TransferFinished:
    """End a transfer: keep the received disks, or remove them."""
