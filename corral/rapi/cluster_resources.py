"""Cluster-wide resources: version, info, features, OS list, cluster changes,
queries and job filter rules."""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral.query.legacy import os_diagnose_filter
from corral.rapi.call import Call, check_type
from corral.rapi.common import map_rows, query_fields_arg, split_fields, tags_resource, uri_list
from corral.rapi.errors import HttpError, bad_request, not_found
from corral.rapi.table import READERS, WRITERS, Resource, method, opcode

RAPI_VERSION = 2
# What luxid can query (Ganeti's QueryTypeOp and QueryTypeLuxi).
QUERY_RESOURCES = (
    C.QR_CLUSTER,
    C.QR_INSTANCE,
    C.QR_NODE,
    C.QR_GROUP,
    C.QR_OS,
    C.QR_EXPORT,
    C.QR_NETWORK,
    C.QR_LOCK,
    C.QR_JOB,
    C.QR_FILTER,
)
# Ganeti's optional RAPI features (rlib2.ALL_FEATURES).
FEATURES = [
    "instance-create-reqv1",
    "instance-reinstall-reqv1",
    "node-migrate-reqv1",
    "node-evac-res1",
]
FILTER_RULE_FIELDS = ["watermark", "priority", "predicates", "action", "reason_trail", "uuid"]
OS_BULK_FIELDS = [
    "name",
    "valid",
    "variants",
    "parameters",
    "api_versions",
    "blacklisted",
    "hidden",
    "trusted",
]


async def get_root(call: Call) -> None:
    return None


async def get_version(call: Call) -> int:
    return RAPI_VERSION


async def get_info(call: Call) -> Any:
    info = await call.luxi.call("QueryClusterInfo")
    # Ganeti's GET_ALIASES of /2/info.
    for name, alias in (("volume_group_name", "vg_name"), ("drbd_usermode_helper", "drbd_helper")):
        if name in info:
            info[alias] = info[name]
    return info


async def get_features(call: Call) -> list[str]:
    return list(FEATURES)


async def get_os(call: Call) -> Any:
    """OS names with their variants (``name+variant``); ``bulk=1``: the details.

    Ganeti runs an OpOsDiagnose job for this; Corral asks the same question
    as a query, which answers the same without a job in the queue.
    """
    if call.bulk:
        result = await call.luxi.call("Query", C.QR_OS, OS_BULK_FIELDS, None)
        return map_rows(OS_BULK_FIELDS, [[v for _s, v in row] for row in result["data"]])
    fields = ["name", "variants"]
    # What Ganeti's OpOsDiagnose leaves out: hidden, blacklisted and invalid OSes.
    result = await call.luxi.call("Query", C.QR_OS, fields, os_diagnose_filter(fields, []))
    names: list[str] = []
    for (_s1, name), (_s2, variants) in result["data"]:
        names.extend(f"{name}+{v}" for v in variants) if variants else names.append(name)
    return names


def _query_resource(call: Call) -> str:
    """The resource of a query path.  Ganeti's luxid cannot parse another
    name, and Ganeti's RAPI answers that luxi error 502 (Bad Gateway)."""
    name = call.items[0]
    if name not in QUERY_RESOURCES:
        raise HttpError(
            502,
            f"Failed to parse request: Can't parse value '{name}' as neither QueryTypeLuxi"
            f" nor QueryTypeOp (resources: {', '.join(sorted(QUERY_RESOURCES))})",
        )
    return name


async def query(call: Call) -> Any:
    if call.body is None:
        fields = query_fields_arg(call)
        return await call.luxi.call("Query", _query_resource(call), fields, None)
    body = check_type(call.body, dict, "Body contents")
    fields = body["fields"] if "fields" in body else query_fields_arg(call)
    qfilter = body.get("qfilter", body.get("filter"))
    return await call.luxi.call("Query", _query_resource(call), fields, qfilter)


async def query_fields(call: Call) -> Any:
    fields = call.str_arg("fields")
    names = None if fields is None else split_fields(fields)
    return await call.luxi.call("QueryFields", _query_resource(call), names)


def _filter_params(call: Call) -> tuple[int, list[Any], Any, list[Any]]:
    body = check_type(call.body, dict, "Body contents") if call.body is not None else {}
    for name in body:
        if name not in ("priority", "predicates", "action", "reason"):
            raise bad_request(
                f"Invalid body parameters: filter rule doesn't support the parameter '{name}'"
            )
    return (
        call.param("priority", 0, int),
        call.param("predicates", [], list),
        call.param("action", "CONTINUE"),
        call.param("reason", [], list),
    )


async def list_filters(call: Call) -> Any:
    if call.bulk:
        rows = await call.luxi.call("QueryFilters", None, FILTER_RULE_FIELDS)
        return map_rows(FILTER_RULE_FIELDS, rows)
    rows = await call.luxi.call("QueryFilters", None, ["uuid"])
    return uri_list([row[0] for row in rows], "/2/filters/%s", "uuid")


async def add_filter(call: Call) -> Any:
    return await call.luxi.call("ReplaceFilter", None, *_filter_params(call))


async def get_filter(call: Call) -> Any:
    rows = await call.luxi.call("QueryFilters", [call.items[0]], FILTER_RULE_FIELDS)
    if not rows or rows[0] is None:
        raise not_found()
    return dict(zip(FILTER_RULE_FIELDS, rows[0], strict=True))


async def replace_filter(call: Call) -> Any:
    return await call.luxi.call("ReplaceFilter", call.items[0], *_filter_params(call))


async def delete_filter(call: Call) -> Any:
    return await call.luxi.call("DeleteFilter", call.items[0])


RESOURCES = [
    Resource("root", "/", {"GET": method(get_root, "Legacy: null")}),
    Resource("2", "/2", {"GET": method(get_root, "Legacy: null")}),
    Resource("version", "/version", {"GET": method(get_version, "The RAPI version, 2")}),
    Resource("info", "/2/info", {"GET": method(get_info, "Cluster information")}),
    Resource("features", "/2/features", {"GET": method(get_features, "Optional features")}),
    Resource("os", "/2/os", {"GET": method(get_os, "Operating systems (name+variant)")}),
    Resource(
        "cluster_modify",
        "/2/modify",
        {
            "PUT": opcode(
                "OP_CLUSTER_SET_PARAMS",
                "Change cluster parameters",
                forbidden=("compression_tools",),
            )
        },
    ),
    Resource(
        "redist_config",
        "/2/redistribute-config",
        {"PUT": opcode("OP_CLUSTER_REDIST_CONF", "Redistribute the configuration")},
    ),
    tags_resource("tags", "/2/tags", C.TAG_CLUSTER),
    Resource(
        "query",
        "/2/query/{resource}",
        {
            "GET": method(query, "Query (?fields=a,b)", READERS),
            "PUT": method(query, "Query with a body {fields, qfilter}", READERS),
        },
    ),
    Resource(
        "query_fields",
        "/2/query/{resource}/fields",
        {"GET": method(query_fields, "Field descriptions (?fields=a,b)")},
    ),
    Resource(
        "filters",
        "/2/filters",
        {
            "GET": method(list_filters, "Job filter rules"),
            "POST": method(add_filter, "Add a job filter rule", WRITERS),
        },
    ),
    Resource(
        "filters_uuid",
        "/2/filters/{filter_uuid}",
        {
            "GET": method(get_filter, "A job filter rule"),
            "PUT": method(replace_filter, "Replace a job filter rule", WRITERS),
            "DELETE": method(delete_filter, "Delete a job filter rule", WRITERS),
        },
    ),
]
