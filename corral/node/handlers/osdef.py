"""Calls that run OS definitions: diagnose, validate, create, rename."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from corral import errors
from corral.node.context import NodeContext
from corral.node.handlers.base import rpc_handler
from corral.node.storage import registry
from corral.osdef.definition import InvalidOS, OSDefinition, diagnose, find_os, split_name
from corral.osdef.env import instance_env, os_core_env
from corral.osdef.media import declared_elsewhere
from corral.osdef.runner import log_file, run_script
from corral.osdef.spec import OsSpec
from corral.rpc import calls_os as calls
from corral.rpc.wire import InstanceWire, JsonObject, OsSpecWire

log = logging.getLogger(__name__)


def node_os(ctx: NodeContext, full_name: str) -> OSDefinition:
    """This node's copy of the OS ``full_name`` names; OpExecError when it is not valid."""
    name, _ = split_name(full_name)
    try:
        return find_os(ctx.paths.os_search_path, name)
    except InvalidOS as err:
        raise errors.OpExecError(f"OS '{name}' is not valid on this node: {err}") from None


def _descriptions(inst: Mapping[str, Any]) -> list[dict[str, Any]]:
    disks = []
    for index, disk in enumerate(inst["disks"]):
        if not isinstance(disk, dict) or disk.get("description") is None:
            raise errors.OpExecError(f"Disk {index} of {inst['name']} has no description")
        disks.append(disk)
    return disks


def local_disks(ctx: NodeContext, inst: Mapping[str, Any]) -> dict[str, Any]:
    """The descriptor with each disk's local path, resolved from its description.

    The scripts write to the disks as root: the disk's template checks the
    path (inside its storage directories; an adoptable block device); a path
    the master may have put in the descriptor is not used.  A disk whose
    writes must go through a mirror is refused (see :func:`opened_disks`).
    """
    disks = []
    for disk in _descriptions(inst):
        path = registry.plain_path(ctx.paths, disk["description"])
        disks.append({**disk, "path": str(path)})
    return {**inst, "disks": disks}


@contextlib.asynccontextmanager
async def opened_disks(ctx: NodeContext, inst: Mapping[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """As :func:`local_disks`, each disk opened for the scripts' writes while
    the block runs (a mirrored disk's reach both its copies)."""
    async with contextlib.AsyncExitStack() as stack:
        disks = []
        for disk in _descriptions(inst):
            path = await stack.enter_async_context(
                registry.local_path(ctx.paths, disk["description"])
            )
            disks.append({**disk, "path": str(path)})
        yield {**inst, "disks": disks}


def instance_spec(inst: Mapping[str, Any]) -> OsSpec:
    """The OS spec the master put in the instance descriptor of a script call."""
    wire = inst.get("osspec")
    if wire is None:
        raise errors.OpExecError(f"The descriptor of {inst.get('name')} carries no OS spec")
    return OsSpec.from_wire(wire)


def _failure(kind: str, code: int, log_path: Path, tail: str) -> errors.OpExecError:
    return errors.OpExecError(
        f"OS {kind} script failed (exit code {code}), last lines in the log file"
        f" {log_path}:\n{tail}"
    )


@rpc_handler(calls.os_diagnose)
async def os_diagnose(ctx: NodeContext) -> list[JsonObject]:
    """Every OS directory in the search path, valid or not (with the reason)."""
    return diagnose(ctx.paths.os_search_path)


@rpc_handler(calls.os_validate)
async def os_validate(ctx: NodeContext, spec: OsSpecWire, debug: int) -> bool:
    """Refuse undeclared parameters, then run ``verify parameters``."""
    os_spec = OsSpec.from_wire(spec)
    osdef = node_os(ctx, os_spec.name)
    if osdef.api_version < 20:
        return True
    declared = {name for name, _ in osdef.parameters}
    unknown = sorted(set(declared_elsewhere(list(os_spec.params))) - declared)
    if unknown:
        raise errors.OpExecError(
            f"OS '{osdef.name}' does not declare the parameter(s) {', '.join(unknown)}"
            f" (declared: {', '.join(sorted(declared)) or 'none'})"
        )
    env = os_core_env(osdef, os_spec, debug)
    path = log_file(ctx.paths.log_dir, "verify", osdef.name, "parameters")
    code, tail = await run_script(
        osdef, "verify", ["parameters"], env, path, os_spec.hidden_values()
    )
    if code != 0:
        raise errors.OpExecError(
            f"OS '{osdef.name}' refused the parameters (verify exit code {code}):\n{tail}"
        )
    return True


@rpc_handler(calls.instance_os_add)
async def instance_os_add(
    ctx: NodeContext, inst: InstanceWire, reinstall: bool, debug: int
) -> bool:
    """Run the OS ``create`` script for an instance (a reinstall when asked)."""
    spec = instance_spec(inst)
    osdef = node_os(ctx, spec.name)
    async with opened_disks(ctx, inst) as local:
        env = instance_env(osdef, local, spec, debug)
        if reinstall:
            env["INSTANCE_REINSTALL"] = "1"
        path = log_file(ctx.paths.log_dir, "add", osdef.name, inst["name"])
        code, tail = await run_script(osdef, "create", [], env, path, spec.hidden_values())
    if code != 0:
        raise _failure("create", code, path, tail)
    return True


@rpc_handler(calls.instance_run_rename)
async def instance_run_rename(
    ctx: NodeContext, inst: InstanceWire, old_name: str, debug: int
) -> bool:
    """Run the OS ``rename`` script: INSTANCE_NAME is new, OLD_INSTANCE_NAME old."""
    spec = instance_spec(inst)
    osdef = node_os(ctx, spec.name)
    async with opened_disks(ctx, inst) as local:
        env = instance_env(osdef, local, spec, debug)
        env["OLD_INSTANCE_NAME"] = old_name
        path = log_file(ctx.paths.log_dir, "rename", osdef.name, f"{old_name}-{inst['name']}")
        code, tail = await run_script(osdef, "rename", [], env, path, spec.hidden_values())
    if code != 0:
        raise _failure("rename", code, path, tail)
    return True
