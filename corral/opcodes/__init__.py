"""All opcodes, declared once; importing this package registers them."""

from corral.opcodes import cluster, tags, test
from corral.opcodes.base import OpCode, from_dict, registry

__all__ = ["OpCode", "cluster", "from_dict", "registry", "tags", "test"]
