"""The calls of a live migration: each hands the step to the instance's hypervisor."""

from __future__ import annotations

from typing import Any

from corral import errors
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.hypervisor import get_hypervisor
from corral.node.hypervisor.base import Hypervisor


def _hypervisor(ctx: NodeContext, inst: Any) -> Hypervisor:
    if not isinstance(inst, dict) or not isinstance(inst.get("name"), str):
        raise errors.OpExecError("Invalid instance description: a dict with a name is needed")
    return get_hypervisor(str(inst.get("hypervisor")), ctx.paths)


@rpc_handler("instance_migratable")
async def instance_migratable(ctx: NodeContext, instance: dict[str, Any]) -> None:
    if instance.get("name") not in _hypervisor(ctx, instance).instances_info():
        raise errors.OpExecError(f"Instance {instance.get('name')} is not running")


@rpc_handler("migration_info")
async def migration_info(ctx: NodeContext, instance: dict[str, Any]) -> Any:
    return await _hypervisor(ctx, instance).migration_info(instance)


@rpc_handler("accept_instance")
async def accept_instance(
    ctx: NodeContext, instance: dict[str, Any], info: Any, target: str
) -> None:
    await _hypervisor(ctx, instance).accept_instance(instance, info, target)


@rpc_handler("instance_finalize_migration_dst")
async def finalize_dst(
    ctx: NodeContext, instance: dict[str, Any], info: Any, success: bool
) -> None:
    await _hypervisor(ctx, instance).finalize_migration_dst(instance, info, bool(success))


@rpc_handler("instance_migrate")
async def instance_migrate(
    ctx: NodeContext, cluster_name: str, instance: dict[str, Any], target: str, live: bool
) -> None:
    await _hypervisor(ctx, instance).migrate_instance(cluster_name, instance, target, bool(live))


@rpc_handler("instance_finalize_migration_src")
async def finalize_src(
    ctx: NodeContext, instance: dict[str, Any], success: bool, live: bool
) -> None:
    await _hypervisor(ctx, instance).finalize_migration_src(instance, bool(success), bool(live))


@rpc_handler("instance_get_migration_status")
async def migration_status(ctx: NodeContext, instance: dict[str, Any]) -> dict[str, Any]:
    return await _hypervisor(ctx, instance).migration_status(instance)
