"""Which instances run where, asked per hypervisor.

``all_instances_info`` fails as a whole when one of the hypervisors it is
given fails on the node; so each hypervisor gets its own call, and a
hypervisor failing on a node leaves only that hypervisor's instances unknown.
With one hypervisor in use (the usual case) this is one call per node.
A query for named instances asks their nodes about those only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Mapping
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


async def named_instances(
    master: Master, wanted: Mapping[Target, Collection[str]]
) -> dict[tuple[str, str], RpcResult]:
    """(node uuid, hypervisor) → the node's answer about the named instances
    only (which of them run, with their info): the node reads nothing else."""
    answers = await asyncio.gather(
        *(
            master.rpc.call([(uuid, address)], "instances_info", [hv, sorted(names)])
            for (uuid, address, hv), names in wanted.items()
        )
    )
    return {(uuid, hv): answer[uuid] for (uuid, _, hv), answer in zip(wanted, answers, strict=True)}
