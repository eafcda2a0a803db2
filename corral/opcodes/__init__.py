"""All opcodes, declared once; importing this package registers them."""

from corral.opcodes import (
    backup,
    cluster,
    group,
    instance,
    network,
    node,
    node_membership,
    os,
    storage,
    tags,
    test,
)
from corral.opcodes.base import OpCode, from_dict, registry

__all__ = [
    "OpCode", "backup", "cluster", "from_dict", "group", "instance", "network", "node",
    "node_membership", "os", "registry", "storage", "tags", "test",
]  # fmt: skip
