"""Instance resources: the collection, one instance and its operations."""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral.rapi.call import Call, check_type
from corral.rapi.common import (
    COMMON_FIELDS,
    DRY_RUN,
    FORCE,
    flag_arg,
    list_items,
    on_item,
    one_item,
    tags_resource,
)
from corral.rapi.errors import HttpError, bad_request
from corral.rapi.opinput import depends_of, fill_opcode
from corral.rapi.table import OPEN, READERS, WRITERS, Resource, method, opcode

I_FIELDS = [
    "name", "admin_state", "os", "pnode", "snodes", "disk_template",
    "nic.ips", "nic.macs", "nic.modes", "nic.uuids", "nic.names", "nic.links",
    "nic.networks", "nic.networks.names", "nic.bridges", "network_port",
    "disk.sizes", "disk.spindles", "disk_usage", "disk.uuids", "disk.names",
    "beparams", "hvparams", "oper_state", "oper_ram", "oper_vcpus", "status",
    "custom_hvparams", "custom_beparams", "custom_nicparams",
    *COMMON_FIELDS,
]  # fmt: skip
_NAME = "instance_name"


def _with_memory(inst: dict[str, Any]) -> dict[str, Any]:
    """Ganeti still answers the old ``memory`` back-end parameter (= maxmem)."""
    inst["beparams"]["memory"] = inst["beparams"]["maxmem"]
    return inst


async def list_instances(call: Call) -> Any:
    items = await list_items(call, "QueryInstances", I_FIELDS, "/2/instances/%s", "id")
    return [_with_memory(inst) for inst in items] if call.bulk else items


async def get_instance(call: Call) -> Any:
    return _with_memory(await one_item(call, "QueryInstances", I_FIELDS))


def _usb_devices_with_commas(data: dict[str, Any]) -> None:
    """Ganeti's RAPI takes ``usb_devices`` separated by spaces or commas."""
    hvparams = data.get("hvparams")
    if isinstance(hvparams, dict) and isinstance(hvparams.get("usb_devices"), str):
        data["hvparams"] = {**hvparams, "usb_devices": hvparams["usb_devices"].replace(" ", ",")}


def _create_inputs(call: Call) -> tuple[Any, dict[str, Any]]:
    data = dict(check_type(call.body, dict, "Body contents"))
    version = data.pop("__version__", 0)
    if version == 0:
        raise bad_request("Instance creation request version 0 is no longer supported")
    if version != 1:
        raise bad_request(f"Unsupported request data version {version}")
    _usb_devices_with_commas(data)
    return data, {"dry_run": call.dry_run}


def _modify_inputs(call: Call) -> tuple[Any, dict[str, Any]]:
    data = dict(check_type(call.body, dict, "Body contents")) if call.body is not None else {}
    _usb_devices_with_commas(data)
    return data, {_NAME: call.items[0]}


async def reinstall(call: Call) -> Any:
    """Shutdown, reinstall and (unless ``start`` is false) startup: one job."""
    if call.body:
        if call.query:
            raise bad_request("Can't combine query and body parameters")
        body = check_type(call.body, dict, "Body contents")
    elif call.query:
        body = {"os": call.str_arg("os"), "start": not call.int_arg("nostartup")}
    else:
        body = {}
    probe = Call(call.resource, call.items, {}, body, call.luxi)
    os_type = probe.param("os", None)
    start = probe.param("start", True, bool)
    osparams = probe.param("osparams", None)
    name = call.items[0]
    reason = call.reason()
    ops = [
        fill_opcode("OP_INSTANCE_SHUTDOWN", depends_of(call), {_NAME: name, "reason": reason}),
        fill_opcode(
            "OP_INSTANCE_REINSTALL",
            {"os_type": os_type, "osparams": osparams},
            {_NAME: name, "reason": reason},
        ),
    ]
    if start:
        ops.append(
            fill_opcode("OP_INSTANCE_STARTUP", {"force": False}, {_NAME: name, "reason": reason})
        )
    return await call.luxi.submit_job(ops)


async def console(call: Call) -> Any:
    rows = await call.luxi.query_classic(
        "QueryInstances", [call.items[0]], ["console", "oper_state"]
    )
    if not rows:
        raise HttpError(404)
    description, running = rows[0]
    if not running:
        raise HttpError(503, "Instance console unavailable")
    return description


def replace_disks_inputs(call: Call) -> tuple[Any, dict[str, Any]]:
    """Ganeti's: the body, or (its legacy interface) the query arguments; the
    disks a list of indexes or a string "0, 1"."""
    if call.body:
        data = dict(check_type(call.body, dict, "Body"))
    elif call.query:
        names = ("remote_node", "mode", "disks", "iallocator")
        data = {name: call.str_arg(name) for name in names}
    else:
        data = {}
    raw = data.pop("disks", None)
    if raw:
        if isinstance(raw, list) and all(type(part) is int for part in raw):
            data["disks"] = raw
        else:
            try:
                data["disks"] = [int(part) for part in str(raw).split(",")]
            except ValueError as err:
                raise bad_request(f"Invalid disk index passed: {err}") from None
    return data, {_NAME: call.items[0]}


def _instance(suffix: str, name: str, methods: dict[str, Any]) -> Resource:
    return Resource(f"instances_name{name}", f"/2/instances/{{instance_name}}{suffix}", methods)


RESOURCES = [
    Resource(
        "instances",
        "/2/instances",
        {
            "GET": method(list_instances, "Instances (bulk=1: with their fields)"),
            "POST": opcode(
                "OP_INSTANCE_CREATE",
                "Create an instance (body: __version__ 1 and the opcode's fields)",
                _create_inputs,
                rename={"os": "os_type", "name": _NAME},
            ),
        },
    ),
    Resource(
        "instances_multi_alloc",
        "/2/instances-multi-alloc",
        {"POST": opcode("OP_INSTANCE_MULTI_ALLOC", "Allocate several instances")},
    ),
    _instance(
        "",
        "",
        {
            "GET": method(get_instance, "An instance's fields"),
            "DELETE": opcode(
                "OP_INSTANCE_REMOVE",
                "Remove an instance",
                on_item(_NAME, ignore_failures=lambda call: False, dry_run=DRY_RUN),
            ),
        },
    ),
    _instance(
        "/info",
        "_info",
        {
            "GET": opcode(
                "OP_INSTANCE_QUERY_DATA",
                "Detailed information, as a job (?static=0|1)",
                lambda call: (
                    {},
                    {"instances": [call.items[0]], "static": call.flag("static")},
                ),
                access=OPEN,
            )
        },
    ),
    _instance(
        "/startup",
        "_startup",
        {
            "PUT": opcode(
                "OP_INSTANCE_STARTUP",
                "Start an instance",
                on_item(
                    _NAME,
                    body=False,
                    force=FORCE,
                    dry_run=DRY_RUN,
                    no_remember=flag_arg("no_remember"),
                ),
            )
        },
    ),
    _instance(
        "/shutdown",
        "_shutdown",
        {
            "PUT": opcode(
                "OP_INSTANCE_SHUTDOWN",
                "Stop an instance",
                on_item(_NAME, no_remember=flag_arg("no_remember"), dry_run=DRY_RUN),
            )
        },
    ),
    _instance(
        "/reboot",
        "_reboot",
        {
            "POST": opcode(
                "OP_INSTANCE_REBOOT",
                "Reboot an instance (?type=soft|hard|full&ignore_secondaries=0|1)",
                on_item(
                    _NAME,
                    reboot_type=lambda call: call.str_arg("type", "hard"),
                    ignore_secondaries=flag_arg("ignore_secondaries"),
                    dry_run=DRY_RUN,
                ),
            )
        },
    ),
    _instance(
        "/reinstall",
        "_reinstall",
        {
            "POST": method(
                reinstall,
                "Reinstall an instance: shutdown, reinstall, startup in one job"
                " (body {os, start, osparams} or ?os=&nostartup=)",
                WRITERS,
            )
        },
    ),
    _instance(
        "/replace-disks",
        "_replace_disks",
        {"POST": opcode("OP_INSTANCE_REPLACE_DISKS", "Replace disks", replace_disks_inputs)},
    ),
    _instance(
        "/activate-disks",
        "_activate_disks",
        {
            "PUT": opcode(
                "OP_INSTANCE_ACTIVATE_DISKS",
                "Activate an instance's disks",
                on_item(_NAME, body=False, ignore_size=flag_arg("ignore_size")),
            )
        },
    ),
    _instance(
        "/deactivate-disks",
        "_deactivate_disks",
        {
            "PUT": opcode(
                "OP_INSTANCE_DEACTIVATE_DISKS",
                "Deactivate an instance's disks",
                on_item(_NAME, body=False, force=FORCE),
            )
        },
    ),
    _instance(
        "/recreate-disks",
        "_recreate_disks",
        {"POST": opcode("OP_INSTANCE_RECREATE_DISKS", "Recreate disks", on_item(_NAME))},
    ),
    _instance(
        "/prepare-export",
        "_prepare_export",
        {
            "PUT": opcode(
                "OP_BACKUP_PREPARE",
                "Prepare an export (?mode=local|remote)",
                on_item(_NAME, body=False, mode=lambda call: call.str_arg("mode")),
            )
        },
    ),
    _instance(
        "/export",
        "_export",
        {
            "PUT": opcode(
                "OP_BACKUP_EXPORT",
                "Export an instance",
                on_item(_NAME),
                rename={"destination": "target_node"},
            )
        },
    ),
    _instance(
        "/migrate",
        "_migrate",
        {"PUT": opcode("OP_INSTANCE_MIGRATE", "Migrate an instance", on_item(_NAME))},
    ),
    _instance(
        "/failover",
        "_failover",
        {"PUT": opcode("OP_INSTANCE_FAILOVER", "Fail an instance over", on_item(_NAME))},
    ),
    _instance(
        "/rename",
        "_rename",
        {"PUT": opcode("OP_INSTANCE_RENAME", "Rename an instance", on_item(_NAME))},
    ),
    _instance(
        "/modify",
        "_modify",
        {
            "PUT": opcode(
                "OP_INSTANCE_SET_PARAMS",
                "Change an instance's parameters",
                _modify_inputs,
                rename={"custom_beparams": "beparams", "custom_hvparams": "hvparams"},
            )
        },
    ),
    _instance(
        "/disk/{disk}/grow",
        "_disk_grow",
        {
            "POST": opcode(
                "OP_INSTANCE_GROW_DISK",
                "Grow a disk (body {amount, absolute, wait_for_sync})",
                on_item(_NAME, disk=lambda call: int(call.items[1])),
            )
        },
    ),
    _instance(
        "/console",
        "_console",
        {"GET": method(console, "How to reach the instance's console", READERS)},
    ),
    tags_resource("instances_name_tags", "/2/instances/{instance_name}/tags", C.TAG_INSTANCE),
]
