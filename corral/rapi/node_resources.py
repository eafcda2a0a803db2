"""Node, node group and network resources."""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral.rapi.call import Call, check_type
from corral.rapi.common import (
    COMMON_FIELDS,
    DRY_RUN,
    FORCE,
    add_aliases,
    list_items,
    on_item,
    one_item,
    tags_resource,
)
from corral.rapi.errors import bad_request
from corral.rapi.table import WRITERS, Resource, method, opcode

N_FIELDS = [
    "name", "offline", "master_candidate", "drained", "dtotal", "dfree", "sptotal", "spfree",
    "mtotal", "mnode", "mfree", "pinst_cnt", "sinst_cnt", "ctotal", "cnos", "cnodes",
    "csockets", "pip", "sip", "role", "pinst_list", "sinst_list", "master_capable",
    "vm_capable", "ndparams", "group.uuid", *COMMON_FIELDS,
]  # fmt: skip
G_FIELDS = [
    "alloc_policy", "name", "node_cnt", "node_list", "ipolicy", "custom_ipolicy",
    "diskparams", "custom_diskparams", "ndparams", "custom_ndparams", *COMMON_FIELDS,
]  # fmt: skip
NET_FIELDS = [
    "name", "network", "gateway", "network6", "gateway6", "mac_prefix", "free_count",
    "reserved_count", "map", "group_list", "inst_list", "external_reservations",
    *COMMON_FIELDS,
]  # fmt: skip
# The node role letters of the query and their RAPI names.
ROLES = {"M": "master", "C": "master-candidate", "R": "regular", "D": "drained", "O": "offline"}
# What PUT /role sets for each role: (master_candidate, offline, drained).
_ROLE_CHANGES: dict[str, tuple[bool | None, bool | None, bool | None]] = {
    "regular": (False, False, False),
    "master-candidate": (True, None, None),
    "drained": (None, None, True),
    "offline": (None, True, None),
}
_NODE = "node_name"
_GROUP = "group_name"
_NETWORK = "network_name"


async def list_nodes(call: Call) -> Any:
    return await list_items(call, "QueryNodes", N_FIELDS, "/2/nodes/%s", "id")


async def get_node(call: Call) -> Any:
    return add_aliases(await one_item(call, "QueryNodes", N_FIELDS), {"sip": "secondary_ip"})


async def get_role(call: Call) -> str:
    (role,) = (await one_item(call, "QueryNodes", ["role"])).values()
    return ROLES[role]


def _role_inputs(call: Call) -> tuple[Any, dict[str, Any]]:
    role = check_type(call.body, str, "Body contents")
    if role not in _ROLE_CHANGES:
        raise bad_request(f"Can't set '{role}' role")
    candidate, offline, drained = _ROLE_CHANGES[role]
    return {}, {
        _NODE: call.items[0],
        "master_candidate": candidate,
        "offline": offline,
        "drained": drained,
        "force": call.force,
        "auto_promote": call.flag("auto-promote"),
    }


def _migrate_inputs(call: Call) -> tuple[Any, dict[str, Any]]:
    if not call.query:
        return call.body, {_NODE: call.items[0]}
    if "live" in call.query and "mode" in call.query:
        raise bad_request("Only one of 'live' and 'mode' should be passed")
    if "live" in call.query:
        mode: str | None = "live" if call.int_arg("live", 1) else "non-live"
    else:
        mode = call.str_arg("mode")
    return {"mode": mode}, {_NODE: call.items[0]}


def _storage_inputs(call: Call) -> tuple[Any, dict[str, Any]]:
    fields = call.str_arg("output_fields")
    if not fields:
        raise bad_request("Missing the required 'output_fields' parameter")
    return {}, {
        "nodes": [call.items[0]],
        "storage_type": call.str_arg("storage_type"),
        "output_fields": fields.split(","),
    }


def _storage_unit_inputs(changes: bool) -> Any:
    def inputs(call: Call) -> tuple[Any, dict[str, Any]]:
        name = call.str_arg("name")
        if not name:
            raise bad_request("Missing the required 'name' parameter")
        static: dict[str, Any] = {
            _NODE: call.items[0],
            "storage_type": call.str_arg("storage_type"),
            "name": name,
        }
        if changes:
            static["changes"] = (
                {"allocatable": bool(call.int_arg("allocatable", 1))}
                if "allocatable" in call.query
                else {}
            )
        return {}, static

    return inputs


async def list_groups(call: Call) -> Any:
    return await list_items(call, "QueryGroups", G_FIELDS, "/2/groups/%s", "name")


async def get_group(call: Call) -> Any:
    return await one_item(call, "QueryGroups", G_FIELDS)


async def list_networks(call: Call) -> Any:
    return await list_items(call, "QueryNetworks", NET_FIELDS, "/2/networks/%s", "name")


async def get_network(call: Call) -> Any:
    return await one_item(call, "QueryNetworks", NET_FIELDS)


def _node(suffix: str, name: str, methods: dict[str, Any]) -> Resource:
    return Resource(f"nodes_name{name}", f"/2/nodes/{{node_name}}{suffix}", methods)


def _group(suffix: str, name: str, methods: dict[str, Any]) -> Resource:
    return Resource(f"groups_name{name}", f"/2/groups/{{group_name}}{suffix}", methods)


def _network(suffix: str, name: str, methods: dict[str, Any]) -> Resource:
    return Resource(f"networks_name{name}", f"/2/networks/{{network_name}}{suffix}", methods)


NODE_RESOURCES = [
    Resource("nodes", "/2/nodes", {"GET": method(list_nodes, "Nodes (bulk=1: with fields)")}),
    _node("", "", {"GET": method(get_node, "A node's fields")}),
    _node(
        "/role",
        "_role",
        {
            "GET": method(get_role, "A node's role"),
            "PUT": opcode("OP_NODE_SET_PARAMS", "Set a node's role (body: the role)", _role_inputs),
        },
    ),
    _node(
        "/powercycle",
        "_powercycle",
        {"POST": opcode("OP_NODE_POWERCYCLE", "Power-cycle a node", on_item(_NODE, force=FORCE))},
    ),
    _node(
        "/evacuate",
        "_evacuate",
        {"POST": opcode("OP_NODE_EVACUATE", "Evacuate a node", on_item(_NODE, dry_run=DRY_RUN))},
    ),
    _node(
        "/migrate",
        "_migrate",
        {"POST": opcode("OP_NODE_MIGRATE", "Migrate a node's instances", _migrate_inputs)},
    ),
    _node(
        "/modify",
        "_modify",
        {"POST": opcode("OP_NODE_SET_PARAMS", "Change a node's parameters", on_item(_NODE))},
    ),
    _node(
        "/storage",
        "_storage",
        {
            "GET": opcode(
                "OP_NODE_QUERY_STORAGE",
                "A node's storage units, as a job",
                _storage_inputs,
                access=WRITERS,
            )
        },
    ),
    _node(
        "/storage/modify",
        "_storage_modify",
        {
            "PUT": opcode(
                "OP_NODE_MODIFY_STORAGE", "Change a storage unit", _storage_unit_inputs(True)
            )
        },
    ),
    _node(
        "/storage/repair",
        "_storage_repair",
        {
            "PUT": opcode(
                "OP_REPAIR_NODE_STORAGE", "Repair a storage unit", _storage_unit_inputs(False)
            )
        },
    ),
    tags_resource("nodes_name_tags", "/2/nodes/{node_name}/tags", C.TAG_NODE),
]

GROUP_RESOURCES = [
    Resource(
        "groups",
        "/2/groups",
        {
            "GET": method(list_groups, "Node groups (bulk=1: with fields)"),
            "POST": opcode(
                "OP_GROUP_ADD",
                "Add a node group",
                lambda call: (call.body, {"dry_run": call.dry_run}),
                rename={"name": _GROUP},
            ),
        },
    ),
    _group(
        "",
        "",
        {
            "GET": method(get_group, "A node group's fields"),
            "DELETE": opcode(
                "OP_GROUP_REMOVE",
                "Remove a node group",
                on_item(_GROUP, body=False, dry_run=DRY_RUN),
            ),
        },
    ),
    _group(
        "/modify",
        "_modify",
        {
            "PUT": opcode(
                "OP_GROUP_SET_PARAMS",
                "Change a node group's parameters",
                on_item(_GROUP),
                rename={
                    "custom_ndparams": "ndparams",
                    "custom_ipolicy": "ipolicy",
                    "custom_diskparams": "diskparams",
                },
            )
        },
    ),
    _group(
        "/rename",
        "_rename",
        {"PUT": opcode("OP_GROUP_RENAME", "Rename a node group", on_item(_GROUP, dry_run=DRY_RUN))},
    ),
    _group(
        "/assign-nodes",
        "_assign_nodes",
        {
            "PUT": opcode(
                "OP_GROUP_ASSIGN_NODES",
                "Move nodes into a node group",
                on_item(_GROUP, dry_run=DRY_RUN, force=FORCE),
            )
        },
    ),
    tags_resource("groups_name_tags", "/2/groups/{group_name}/tags", C.TAG_NODEGROUP),
]

NETWORK_RESOURCES = [
    Resource(
        "networks",
        "/2/networks",
        {
            "GET": method(list_networks, "Networks (bulk=1: with fields)"),
            "POST": opcode(
                "OP_NETWORK_ADD",
                "Add a network",
                lambda call: (call.body, {"dry_run": call.dry_run}),
                rename={"name": _NETWORK},
            ),
        },
    ),
    _network(
        "",
        "",
        {
            "GET": method(get_network, "A network's fields"),
            "DELETE": opcode(
                "OP_NETWORK_REMOVE", "Remove a network", on_item(_NETWORK, dry_run=DRY_RUN)
            ),
        },
    ),
    _network(
        "/connect",
        "_connect",
        {
            "PUT": opcode(
                "OP_NETWORK_CONNECT",
                "Connect a network to a node group",
                on_item(_NETWORK, dry_run=DRY_RUN),
            )
        },
    ),
    _network(
        "/disconnect",
        "_disconnect",
        {
            "PUT": opcode(
                "OP_NETWORK_DISCONNECT",
                "Disconnect a network from a node group",
                on_item(_NETWORK, dry_run=DRY_RUN),
            )
        },
    ),
    _network(
        "/modify",
        "_modify",
        {
            "PUT": opcode(
                "OP_NETWORK_SET_PARAMS", "Change a network's parameters", on_item(_NETWORK)
            )
        },
    ),
    tags_resource("networks_name_tags", "/2/networks/{network_name}/tags", C.TAG_NETWORK),
]
