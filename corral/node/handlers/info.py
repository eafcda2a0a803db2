"""Calls that describe the node: version, node_info, node_capabilities, node_verify."""

from __future__ import annotations

import asyncio
import os
import re
import time
from pathlib import Path
from typing import Any

import corral
from corral import constants as C
from corral import errors
from corral.crypto.certs import cert_info
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.meminfo import memory_info
from corral.node.storage import registry
from corral.rpc import calls_node as calls
from corral.rpc import node_verify as NV
from corral.rpc import versions
from corral.rpc.wire import JsonObject, NodeInfo, StorageSpace, StorageUnitWire

_MIB = 1024 * 1024
_NUMA_NODE_RE = re.compile(r"^node\d+$")


@rpc_handler(calls.version)
async def version(ctx: NodeContext) -> int:
    """The node's internode protocol version."""
    return C.PROTOCOL_VERSION


def boot_id(path: Path = Path("/proc/sys/kernel/random/boot_id")) -> str:
    """The kernel's random id of this boot (a new one after each reboot)."""
    return path.read_text().strip()


def cpu_info() -> dict[str, int]:
    """Number of CPUs, of those the node's OS uses (all of them), NUMA nodes
    and sockets (at least 1 each)."""
    try:
        numa = sum(
            1 for name in os.listdir("/sys/devices/system/node") if _NUMA_NODE_RE.match(name)
        )
    except OSError:
        numa = 0
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    sockets = set(re.findall(r"^physical id\s*:\s*(\d+)", cpuinfo, re.MULTILINE))
    cpus = os.cpu_count() or 1
    return {
        "cpu_total": cpus,
        "cpu_dom0": cpus,
        "cpu_nodes": max(numa, 1),
        "cpu_sockets": max(len(sockets), 1),
    }


def storage_info(ctx: NodeContext, unit: StorageUnitWire) -> StorageSpace:
    """Size and free space in MiB of the storage unit ``[type, key]``."""
    try:
        space = registry.capacity(ctx.paths, unit)
    except (OSError, errors.OpExecError) as err:
        raise errors.OpExecError(f"Cannot get storage info of {unit}: {err}") from None
    return {"type": unit[0], "path": unit[1], "total": space.total, "free": space.free}


@rpc_handler(calls.node_info)
async def node_info(ctx: NodeContext, storage_units: list[StorageUnitWire]) -> NodeInfo:
    """The boot id, memory and CPUs of the node and space in the given storage units."""
    memory, cpus = memory_info(), cpu_info()
    # In a thread: a unit's capacity may wait for a removed disk's blocks to be freed.
    storage = await asyncio.to_thread(lambda: [storage_info(ctx, u) for u in storage_units])
    return {
        "bootid": boot_id(),
        "memory_total": memory["memory_total"],
        "memory_free": memory["memory_free"],
        "memory_dom0": memory["memory_dom0"],
        "cpu_total": cpus["cpu_total"],
        "cpu_dom0": cpus["cpu_dom0"],
        "cpu_nodes": cpus["cpu_nodes"],
        "cpu_sockets": cpus["cpu_sockets"],
        "storage": storage,
    }


@rpc_handler(calls.node_capabilities)
async def node_capabilities(ctx: NodeContext, storage_units: list[StorageUnitWire]) -> JsonObject:
    """The hypervisors this node can run and the disk templates it can serve
    (with ``storage_units``, ``[type, key]`` each, as the cluster's)."""
    # Imported here: the hypervisors import this module.
    from corral.node import capabilities

    return await asyncio.to_thread(capabilities.report_wire, ctx.paths, storage_units)


@rpc_handler(calls.node_verify)
async def node_verify(ctx: NodeContext, checks: dict[str, Any], node_name: str) -> JsonObject:
    """What the master checks about a node: version, clock and certificate,
    and the checks ``checks`` names (see :mod:`corral.node.verify_checks`).

    Names this node does not know are ignored, so that a newer master can
    talk to an older node.
    """
    # Imported here: the hypervisors import this module.
    from corral.node import verify_checks

    wanted = dict(checks)
    templates = wanted.pop(NV.STORAGE_FILES, None)
    hypervisors = wanted.pop(NV.INSTANCELIST, None)
    result = await asyncio.to_thread(verify_checks.run_checks, ctx.paths, wanted)
    if hypervisors is not None:
        try:
            result[NV.INSTANCELIST] = await verify_checks.instance_list(ctx.paths, hypervisors)
        except errors.GenericError as err:
            result[NV.FAILURES][NV.INSTANCELIST] = err.message
    if templates is not None:
        await _storage_files(ctx, templates, result)
    return {
        **result,
        "node_name": node_name,
        "version": C.PROTOCOL_VERSION,
        "release": corral.__version__,
        # Corral's own key (Ganeti's answer has none): the node-call protocol.
        "node_calls": versions.NODE_CALLS,
        "time": time.time(),
        "certificate": cert_info(ctx.paths.server_pem),
    }


async def _storage_files(ctx: NodeContext, templates: Any, result: dict[str, Any]) -> None:
    """The files in the file-based templates' directories (for orphan disks)."""
    from corral.node.handlers.storage import file_storage_list

    try:
        if not isinstance(templates, list):
            raise errors.OpExecError(f"{NV.STORAGE_FILES}: expected a list of disk templates")
        result[NV.STORAGE_FILES] = {t: await file_storage_list(ctx, t) for t in templates}
    except errors.GenericError as err:
        result[NV.FAILURES][NV.STORAGE_FILES] = err.message
