"""Consoles of running instances, as their primary nodes' hypervisors describe
them: what ``OP_INSTANCE_CONSOLE`` returns and the instance query's
``console`` field shows (Ganeti's ``InstanceConsole`` dicts)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from corral import constants as C
from corral.objects import Cluster, Instance, Node, NodeGroup
from corral.rpc.calls_console import instance_console
from corral.rpc.result import RpcResult
from corral.rpc.wire import InstanceWire, JsonObject
from corral.services.ndparams import ssh_port
from corral.services.params import filled_beparams, filled_hvparams

if TYPE_CHECKING:
    from corral.services.context import Master


def console_descriptor(cluster: Cluster, inst: Instance) -> InstanceWire:
    """The instance as a hypervisor describes its console: its filled
    parameters and network port, no disks or NICs (the node need not resolve them)."""
    be = filled_beparams(cluster, inst)
    return {
        "name": inst.name,
        "uuid": inst.uuid,
        "os": inst.os,
        "hypervisor": inst.hypervisor,
        "beparams": be,
        "hvparams": filled_hvparams(cluster, inst),
        "memory": be["maxmem"],
        "vcpus": be["vcpus"],
        # A VNC console's display is its port's.
        "network_port": inst.network_port,
    }


def _with_port(console: JsonObject, port: Any) -> JsonObject:
    """An ``ssh`` console is reached through its node: without a port of its
    own, the node's ``ssh_port`` parameter is its port, as Ganeti's kvm gives it."""
    ssh = console.get("kind") == C.CONS_SSH
    return {**console, "port": port} if ssh and console.get("port") is None else console


async def _node_consoles(
    master: Master, node: Node, insts: list[Instance]
) -> list[RpcResult[JsonObject]]:
    """One call to ``node`` for the consoles of ``insts``: one result each."""
    cfg = master.cfg
    descriptors = [console_descriptor(cfg.cluster, inst) for inst in insts]
    answer = await master.rpc.result(node, instance_console(descriptors, node.name))
    if answer.failed or len(answer.payload) != len(insts):
        fail_msg = answer.fail_msg or f"Invalid console answer from node {node.name}"
        return [RpcResult(answer.node, answer.call, fail_msg=fail_msg) for _ in insts]
    port = ssh_port(cfg.cluster, cfg.get(NodeGroup, node.group), node)
    return [RpcResult(answer.node, answer.call, _with_port(c, port)) for c in answer.payload]


async def instance_consoles(
    master: Master, instances: Sequence[Instance]
) -> dict[str, RpcResult[JsonObject]]:
    """Instance uuid → its primary node's description of its console (the
    instances must be running): one call per primary node, all at once."""
    by_node: dict[str, list[Instance]] = {}
    for inst in instances:
        by_node.setdefault(inst.primary_node, []).append(inst)
    nodes = [master.cfg.lookup(Node, uuid) for uuid in by_node]
    answers = await asyncio.gather(
        *(_node_consoles(master, node, by_node[node.uuid]) for node in nodes)
    )
    return {
        inst.uuid: result
        for node, results in zip(nodes, answers, strict=True)
        for inst, result in zip(by_node[node.uuid], results, strict=True)
    }
