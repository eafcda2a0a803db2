"""The node calls that act on disks: each takes disk descriptions
(:class:`corral.rpc.wire.DiskWire`), never a bare path; noded resolves and
checks the paths itself.  Ganeti's call names."""

# The bodies are the signatures' only: mypy must not ask them for a result.
# mypy: disable-error-code="empty-body"

from __future__ import annotations

from corral import constants as C
from corral.rpc.declare import CHANGES, READS, node_call
from corral.rpc.wire import DiskWire, ExtStorageWire


@node_call(C.RPC_TMO_SLOW, effect=CHANGES)
def blockdev_create(disk: DiskWire) -> None:
    """Create (or adopt) a disk."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def blockdev_remove(disk: DiskWire) -> None:
    """Remove a disk (adopted ones stay)."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def blockdev_grow(disk: DiskWire, new_size: int) -> None:
    """Grow a disk to new_size MiB."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def blockdev_rename(devlist: list[tuple[DiskWire, list[str]]]) -> None:
    """Move disks to new logical ids: ``(disk, new logical_id)`` each."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def blockdev_assemble(disk: DiskWire) -> str:
    """Make a disk ready for use here; its path on the node (Ganeti's "node
    visible name")."""


@node_call(C.RPC_TMO_NORMAL, effect=CHANGES)
def blockdev_shutdown(disk: DiskWire) -> None:
    """Undo blockdev_assemble; the data stays."""


@node_call(C.RPC_TMO_1DAY, effect=CHANGES)
def blockdev_convert(src: DiskWire, dst: DiskWire) -> None:
    """Copy a disk's data to a new disk of another template (same size)."""


@node_call(C.RPC_TMO_URGENT, effect=READS)
def blockdev_getdimensions(disks: list[DiskWire]) -> list[tuple[int, int | None]]:
    """Each disk's ``[size in bytes, spindles]``."""


@node_call(C.RPC_TMO_FAST, effect=READS)
def file_storage_list(disk_template: str) -> list[str]:
    """Every file below a file-based template's directories (for orphans)."""


@node_call(C.RPC_TMO_FAST, effect=READS)
def extstorage_diagnose() -> list[ExtStorageWire]:
    """Every ExtStorage provider directory of the search path, checked (no script run)."""
