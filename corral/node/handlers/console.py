"""How to reach instances' consoles: their hypervisors describe them."""

from __future__ import annotations

from typing import Any

from corral import errors
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.hypervisor import get_hypervisor
from corral.node.hypervisor.spec import InstanceSpec


@rpc_handler("instance_console")
async def instance_console(
    ctx: NodeContext, instances: Any, node_name: Any
) -> list[dict[str, Any]]:
    """Ganeti's ``InstanceConsole`` dicts of ``instances`` (descriptors, in
    order) running on this node, known to the cluster as ``node_name``."""
    if not isinstance(node_name, str) or not node_name:
        raise errors.OpExecError(f"Invalid node name {node_name!r}")
    if not isinstance(instances, list):
        raise errors.OpExecError("Invalid instances: a list of instance descriptions is needed")
    out = []
    for inst in instances:
        spec = InstanceSpec.from_wire(ctx.paths, inst)
        hypervisor = get_hypervisor(spec.hypervisor, ctx.paths)
        out.append((await hypervisor.console(spec, node_name)).to_wire())
    return out
