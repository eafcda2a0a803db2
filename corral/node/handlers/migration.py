"""The calls of a live migration: each hands the step to the instance's hypervisor."""

from __future__ import annotations

from typing import Any

from corral import errors
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.hypervisor import get_hypervisor
from corral.node.hypervisor.base import Hypervisor
from corral.node.hypervisor.spec import InstanceSpec
from corral.rpc import calls_migration as calls
from corral.rpc.wire import InstanceWire, JsonObject


def _typed(
    ctx: NodeContext, inst: InstanceWire, incoming: bool = False
) -> tuple[Hypervisor, InstanceSpec]:
    spec = InstanceSpec.from_wire(ctx.paths, inst, incoming)
    return get_hypervisor(spec.hypervisor, ctx.paths), spec


@rpc_handler(calls.instance_migratable)
async def instance_migratable(ctx: NodeContext, instance: InstanceWire) -> None:
    hv, spec = _typed(ctx, instance)
    if not await hv.instances_info([spec.name]):
        raise errors.OpExecError(f"Instance {spec.name} is not running")


@rpc_handler(calls.migration_info)
async def migration_info(ctx: NodeContext, instance: InstanceWire) -> Any:
    hv, spec = _typed(ctx, instance)
    return await hv.migration_info(spec)


@rpc_handler(calls.accept_instance)
async def accept_instance(ctx: NodeContext, instance: InstanceWire, info: Any, target: str) -> Any:
    hv, spec = _typed(ctx, instance, incoming=True)
    return await hv.accept_instance(spec, info, target)


@rpc_handler(calls.instance_finalize_migration_dst)
async def finalize_dst(ctx: NodeContext, instance: InstanceWire, info: Any, success: bool) -> None:
    hv, spec = _typed(ctx, instance, incoming=True)
    await hv.finalize_migration_dst(spec, info, success)


@rpc_handler(calls.instance_migrate)
async def instance_migrate(
    ctx: NodeContext,
    cluster_name: str,
    instance: InstanceWire,
    target: str,
    live: bool,
    accepted: Any,
) -> None:
    hv, spec = _typed(ctx, instance)
    await hv.migrate_instance(cluster_name, spec, target, live, accepted)


@rpc_handler(calls.instance_finalize_migration_src)
async def finalize_src(ctx: NodeContext, instance: InstanceWire, success: bool, live: bool) -> None:
    hv, spec = _typed(ctx, instance)
    await hv.finalize_migration_src(spec, success, live)


@rpc_handler(calls.instance_get_migration_status)
async def migration_status(ctx: NodeContext, instance: InstanceWire) -> JsonObject:
    hv, spec = _typed(ctx, instance)
    return await hv.migration_status(spec)
