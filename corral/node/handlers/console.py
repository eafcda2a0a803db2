"""How to reach instances' consoles: their hypervisors describe them."""

from __future__ import annotations

from corral import errors
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.hypervisor import get_hypervisor
from corral.node.hypervisor.spec import InstanceSpec
from corral.rpc import calls_console as calls
from corral.rpc.wire import InstanceWire, JsonObject


@rpc_handler(calls.instance_console)
async def instance_console(
    ctx: NodeContext, instances: list[InstanceWire], node_name: str
) -> list[JsonObject]:
    """Ganeti's ``InstanceConsole`` dicts of ``instances`` (descriptors, in
    order) running on this node, known to the cluster as ``node_name``."""
    if not node_name:
        raise errors.OpExecError(f"Invalid node name {node_name!r}")
    out = []
    for inst in instances:
        spec = InstanceSpec.from_wire(ctx.paths, inst)
        hypervisor = get_hypervisor(spec.hypervisor, ctx.paths)
        out.append((await hypervisor.console(spec, node_name)).to_wire())
    return out
