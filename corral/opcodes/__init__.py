"""All opcodes, declared once; importing this package registers them."""

from corral.opcodes import cluster, instance, os, tags, test
from corral.opcodes.base import OpCode, from_dict, registry

__all__ = ["OpCode", "cluster", "from_dict", "instance", "os", "registry", "tags", "test"]
