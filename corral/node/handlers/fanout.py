"""The calls of queries that ask for named objects only (see corral.rpc.calls_fanout)."""

from __future__ import annotations

from typing import Any

from corral import errors
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.hypervisor import get_hypervisor


@rpc_handler("instances_info")
async def instances_info(
    ctx: NodeContext, hypervisor: str, names: list[str]
) -> dict[str, dict[str, Any]]:
    """The named instances that run on ``hypervisor`` here: name → info."""
    if not (isinstance(names, list) and all(isinstance(name, str) for name in names)):
        raise errors.OpExecError("Invalid instance names: a list of strings is needed")
    running = await get_hypervisor(hypervisor, ctx.paths).instances_info(names)
    return {info.name: {**info.to_wire(), "hypervisor": hypervisor} for info in running}
