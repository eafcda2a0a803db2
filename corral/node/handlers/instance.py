"""Calls that start, stop and report instances."""

from __future__ import annotations

import asyncio
from typing import Any

from corral import errors
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.hypervisor import get_hypervisor
from corral.node.hypervisor.base import REBOOT_HARD, REBOOT_SOFT
from corral.node.hypervisor.spec import InstanceSpec
from corral.node.storage import registry


@rpc_handler("instance_start")
async def instance_start(ctx: NodeContext, inst: dict[str, Any], paused: bool) -> None:
    spec = InstanceSpec.from_wire(ctx.paths, inst)
    await get_hypervisor(spec.hypervisor, ctx.paths).start(spec, bool(paused))


@rpc_handler("instance_shutdown")
async def instance_shutdown(ctx: NodeContext, hypervisor: str, name: str, timeout: int) -> None:
    await get_hypervisor(hypervisor, ctx.paths).stop(name, timeout=timeout)


@rpc_handler("instance_reboot")
async def instance_reboot(
    ctx: NodeContext, inst: dict[str, Any], reboot_type: str, timeout: int
) -> None:
    """soft: the guest reboots; hard: the hypervisor resets it (a full reboot is
    a shutdown and a start, both called by the master)."""
    if reboot_type not in (REBOOT_SOFT, REBOOT_HARD):
        raise errors.OpExecError(f"Invalid reboot type {reboot_type!r}")
    spec = InstanceSpec.from_wire(ctx.paths, inst)
    await get_hypervisor(spec.hypervisor, ctx.paths).reboot(spec, reboot_type, timeout)


@rpc_handler("instance_rename")
async def instance_rename(ctx: NodeContext, hypervisor: str, old_name: str, new_name: str) -> None:
    await get_hypervisor(hypervisor, ctx.paths).rename(old_name, new_name)


@rpc_handler("all_instances_info")
async def all_instances_info(ctx: NodeContext, hypervisors: list[str]) -> dict[str, dict[str, Any]]:
    """Running instances of the given hypervisors: name → info."""
    out: dict[str, dict[str, Any]] = {}
    for name in hypervisors:
        for info in await get_hypervisor(name, ctx.paths).instances_info():
            out[info.name] = {**info.to_wire(), "hypervisor": name}
    return out


@rpc_handler("hypervisor_validate_params")
async def hypervisor_validate_params(
    ctx: NodeContext, hvname: str, hvparams: dict[str, Any]
) -> None:
    """Refuse ``hvparams`` (filled) that this node cannot honour."""
    if not isinstance(hvparams, dict):
        raise errors.OpExecError("Invalid hypervisor parameters: a dict is needed")
    problems = await get_hypervisor(hvname, ctx.paths).validate_params(hvparams)
    if problems:
        raise errors.OpExecError("; ".join(problems))


@rpc_handler("hypervisor_info")
async def hypervisor_info(ctx: NodeContext, hypervisor: str, storage_unit: Any) -> dict[str, Any]:
    """Free memory for instances and free space in the storage unit ``[type, key]``."""
    info = await get_hypervisor(hypervisor, ctx.paths).node_info()
    # In a thread: it may wait for a removed disk's blocks to be freed.
    space = await asyncio.to_thread(registry.capacity, ctx.paths, storage_unit)
    return {**info, "storage_total": space.total, "storage_free": space.free}
