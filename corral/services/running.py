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

from corral.rpc.calls_fanout import instances_info
from corral.rpc.calls_instance import all_instances_info
from corral.rpc.result import NodeAddress, RpcResult
from corral.rpc.wire import RunningInstance

if TYPE_CHECKING:
    from corral.services.context import Master

# (node uuid, node address, hypervisor): what to ask.
Target = tuple[str, str, str]
# (node uuid, hypervisor) → the node's answer: running instance name → info.
Running = dict[tuple[str, str], RpcResult[dict[str, RunningInstance]]]


async def running_instances(master: Master, targets: Iterable[Target]) -> Running:
    """(node uuid, hypervisor) → the node's answer: running instance name → info."""
    nodes_of: dict[str, list[NodeAddress]] = {}
    for uuid, address, hypervisor in targets:
        nodes_of.setdefault(hypervisor, []).append(NodeAddress(uuid, address))
    hypervisors = sorted(nodes_of)
    answers = await asyncio.gather(
        *(master.rpc.results(nodes_of[hv], all_instances_info([hv])) for hv in hypervisors)
    )
    return {
        (uuid, hv): result
        for hv, results in zip(hypervisors, answers, strict=True)
        for uuid, result in results.items()
    }


async def named_instances(master: Master, wanted: Mapping[Target, Collection[str]]) -> Running:
    """(node uuid, hypervisor) → the node's answer about the named instances
    only (which of them run, with their info): the node reads nothing else."""
    answers = await asyncio.gather(
        *(
            master.rpc.result(NodeAddress(uuid, address), instances_info(hv, sorted(names)))
            for (uuid, address, hv), names in wanted.items()
        )
    )
    return {(uuid, hv): answer for (uuid, _, hv), answer in zip(wanted, answers, strict=True)}
