"""The calls of a live migration: each hands the step to the instance's hypervisor."""

from __future__ import annotations

from typing import Any

from corral import errors
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.hypervisor import get_hypervisor
from corral.node.hypervisor.base import Hypervisor
from corral.node.hypervisor.spec import InstanceSpec


def _typed(ctx: NodeContext, inst: Any) -> tuple[Hypervisor, InstanceSpec]:
    spec = InstanceSpec.from_wire(ctx.paths, inst)
    return get_hypervisor(spec.hypervisor, ctx.paths), spec


@rpc_handler("instance_migratable")
async def instance_migratable(ctx: NodeContext, instance: dict[str, Any]) -> None:
    hv, spec = _typed(ctx, instance)
    if not await hv.instances_info([spec.name]):
        raise errors.OpExecError(f"Instance {spec.name} is not running")


@rpc_handler("migration_info")
async def migration_info(ctx: NodeContext, instance: dict[str, Any]) -> Any:
    hv, spec = _typed(ctx, instance)
    return await hv.migration_info(spec)


@rpc_handler("accept_instance")
async def accept_instance(
    ctx: NodeContext, instance: dict[str, Any], info: Any, target: str
) -> Any:
    hv, spec = _typed(ctx, instance)
    return await hv.accept_instance(spec, info, target)


@rpc_handler("instance_finalize_migration_dst")
async def finalize_dst(
    ctx: NodeContext, instance: dict[str, Any], info: Any, success: bool
) -> None:
    hv, spec = _typed(ctx, instance)
    await hv.finalize_migration_dst(spec, info, bool(success))


@rpc_handler("instance_migrate")
async def instance_migrate(
    ctx: NodeContext,
    cluster_name: str,
    instance: dict[str, Any],
    target: str,
    live: bool,
    accepted: Any,
) -> None:
    hv, spec = _typed(ctx, instance)
    await hv.migrate_instance(cluster_name, spec, target, bool(live), accepted)


@rpc_handler("instance_finalize_migration_src")
async def finalize_src(
    ctx: NodeContext, instance: dict[str, Any], success: bool, live: bool
) -> None:
    hv, spec = _typed(ctx, instance)
    await hv.finalize_migration_src(spec, bool(success), bool(live))


@rpc_handler("instance_get_migration_status")
async def migration_status(ctx: NodeContext, instance: dict[str, Any]) -> dict[str, Any]:
    hv, spec = _typed(ctx, instance)
    return await hv.migration_status(spec)
