"""Which instances run where, asked per hypervisor.

``all_instances_info`` fails as a whole when one of the hypervisors it is
given fails on the node; so each hypervisor gets its own call, and a
hypervisor failing on a node leaves only that hypervisor's instances unknown.
With one hypervisor in use (the usual case) this is one call per node.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from corral.master.context import Master
    from corral.rpc.client import RpcResult

# (node uuid, node address, hypervisor): what to ask.
Target = tuple[str, str, str]


async def running_instances(
    master: Master, targets: Iterable[Target]
) -> dict[tuple[str, str], RpcResult]:
    """(node uuid, hypervisor) → the node's answer: running instance name → info."""
    nodes_of: dict[str, dict[str, str]] = {}
    for uuid, address, hypervisor in targets:
        nodes_of.setdefault(hypervisor, {})[uuid] = address
    hypervisors = sorted(nodes_of)
    answers = await asyncio.gather(
        *(
            master.rpc.call(list(nodes_of[hv].items()), "all_instances_info", [[hv]])
            for hv in hypervisors
        )
    )
    return {
        (uuid, hv): result
        for hv, results in zip(hypervisors, answers, strict=True)
        for uuid, result in results.items()
    }
