"""The node RPC calls that act on disks: each takes disk descriptions
(:class:`corral.storage.disk.DiskDescription` as dicts), never a bare path;
noded resolves and checks the paths itself.  Ganeti's call names."""

from __future__ import annotations

from corral import constants as C
from corral.rpc.calls import RpcCall

STORAGE_CALLS = (
    RpcCall("blockdev_create", C.RPC_TMO_SLOW, ("disk",), "Create (or adopt) a disk"),
    RpcCall("blockdev_remove", C.RPC_TMO_NORMAL, ("disk",), "Remove a disk (adopted ones stay)"),
    RpcCall("blockdev_grow", C.RPC_TMO_NORMAL, ("disk", "new_size"), "Grow a disk to new_size MiB"),
    RpcCall(
        "blockdev_rename",
        C.RPC_TMO_NORMAL,
        ("devlist",),
        "Move disks to new logical ids: a list of [disk, new logical_id]",
    ),
    RpcCall(
        "blockdev_getdimensions",
        C.RPC_TMO_URGENT,
        ("disks",),
        "Each disk's [size in bytes, spindles]",
    ),
    RpcCall(
        "file_storage_list",
        C.RPC_TMO_FAST,
        ("disk_template",),
        "Every file below a file-based template's directories (for orphans)",
    ),
)
