"""What the export units (and the import side of instance creation) share:
Ganeti's node checks and the compression whitelist."""

from __future__ import annotations

from corral import constants as C
from corral import errors
from corral.objects import Node


def check_node_online(node: Node) -> None:
    """Ganeti's CheckNodeOnline."""
    if node.offline:
        raise errors.OpPrereqError(f"Can't use offline node: {node.name}", C.ECODE_STATE)


def check_node_not_drained(node: Node) -> None:
    """Ganeti's CheckNodeNotDrained."""
    if node.drained:
        raise errors.OpPrereqError(f"Can't use drained node {node.name}", C.ECODE_STATE)


def check_compression_tool(compress: str) -> None:
    """Ganeti's CheckCompressionTool: "none" or one of the cluster's tools.

    The cluster's tools are Ganeti's defaults plus zstd, which every Corral
    node runs in-process (Corral has no ``--compression-tools`` setting yet).
    """
    allowed = C.IEC_DEFAULT_TOOLS
    if compress != C.IEC_NONE and compress not in allowed:
        raise errors.OpPrereqError(
            f"Compression tool not allowed, tools allowed are [{', '.join(allowed)}]",
            C.ECODE_INVAL,
        )
