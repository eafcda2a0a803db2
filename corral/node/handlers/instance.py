"""Calls that start, stop and report instances."""

from __future__ import annotations

from typing import Any

from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.hypervisor import get_hypervisor
from corral.node.storage import file as file_storage
from corral.node.storage.dirs import storage_path


@rpc_handler("instance_start")
async def instance_start(ctx: NodeContext, inst: dict[str, Any], paused: bool) -> None:
    await get_hypervisor(inst["hypervisor"], ctx.paths).start(inst, paused)


@rpc_handler("instance_shutdown")
async def instance_shutdown(ctx: NodeContext, hypervisor: str, name: str, timeout: int) -> None:
    await get_hypervisor(hypervisor, ctx.paths).stop(name, timeout=timeout)


@rpc_handler("instance_reboot")
async def instance_reboot(
    ctx: NodeContext, inst: dict[str, Any], reboot_type: str, timeout: int
) -> None:
    """soft: the hypervisor reboots it; hard: stop and start again."""
    hv = get_hypervisor(inst["hypervisor"], ctx.paths)
    if reboot_type == "soft":
        await hv.reboot(inst["name"])
        return
    await hv.stop(inst["name"], timeout=timeout)
    await hv.start(inst)


@rpc_handler("instance_rename")
async def instance_rename(ctx: NodeContext, hypervisor: str, old_name: str, new_name: str) -> None:
    await get_hypervisor(hypervisor, ctx.paths).rename(old_name, new_name)


@rpc_handler("all_instances_info")
async def all_instances_info(ctx: NodeContext, hypervisors: list[str]) -> dict[str, dict[str, Any]]:
    """Running instances of the given hypervisors: name → info."""
    out: dict[str, dict[str, Any]] = {}
    for name in hypervisors:
        for inst, info in get_hypervisor(name, ctx.paths).instances_info().items():
            out[inst] = {**info, "hypervisor": name}
    return out


@rpc_handler("hypervisor_info")
async def hypervisor_info(ctx: NodeContext, hypervisor: str, storage_dir: str) -> dict[str, Any]:
    """Free memory for instances and free space in the file storage directory."""
    info = get_hypervisor(hypervisor, ctx.paths).node_info()
    directory = storage_path(ctx.paths, storage_dir, strictly=False)
    total, free = file_storage.free_mib(directory)
    return {**info, "storage_total": total, "storage_free": free}
