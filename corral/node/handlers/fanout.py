"""The calls of queries that ask for named objects only (see corral.rpc.calls_fanout)."""

from __future__ import annotations

from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.hypervisor import get_hypervisor
from corral.rpc import calls_fanout as calls
from corral.rpc.wire import RunningInstance


@rpc_handler(calls.instances_info)
async def instances_info(
    ctx: NodeContext, hypervisor: str, names: list[str]
) -> dict[str, RunningInstance]:
    """The named instances that run on ``hypervisor`` here: name → info."""
    running = await get_hypervisor(hypervisor, ctx.paths).instances_info(names)
    return {info.name: info.to_wire(hypervisor) for info in running}
