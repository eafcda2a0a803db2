"""Helpers shared by the resource handlers: lists, item queries, tags."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from corral import constants as C
from corral import errors
from corral.rapi.call import Call
from corral.rapi.errors import bad_request, not_found
from corral.rapi.table import OpInputs, Resource, method, opcode

COMMON_FIELDS = ["ctime", "mtime", "uuid", "serial_no", "tags"]


def uri_list(ids: list[Any], uri_format: str, id_field: str = "id") -> list[dict[str, Any]]:
    """Ganeti's BuildUriList: sorted ids, each with its resource's URI."""
    return [{id_field: item, "uri": uri_format % item} for item in sorted(ids)]


def map_rows(fields: list[str], rows: list[list[Any]]) -> list[dict[str, Any]]:
    return [dict(zip(fields, row, strict=True)) for row in rows]


async def list_items(
    call: Call, method_name: str, fields: list[str], uri_format: str, id_field: str
) -> list[dict[str, Any]]:
    """A collection: names with URIs, or with ``bulk=1`` every object's fields."""
    if call.bulk:
        rows = await call.luxi.query_classic(method_name, [], fields, call.lock)
        return map_rows(fields, rows)
    rows = await call.luxi.query_classic(method_name, [], ["name"], call.lock)
    return uri_list([row[0] for row in rows], uri_format, id_field)


async def one_item(call: Call, method_name: str, fields: list[str]) -> dict[str, Any]:
    """One object's fields; 404 if there is no such object."""
    try:
        rows = await call.luxi.query_classic(method_name, [call.items[0]], fields, call.lock)
    except errors.OpPrereqError as err:
        if err.ecode == C.ECODE_NOENT:
            raise not_found() from None
        raise
    if not rows:
        raise not_found()
    return dict(zip(fields, rows[0], strict=True))


def add_aliases(result: dict[str, Any], aliases: dict[str, str]) -> dict[str, Any]:
    """Ganeti's GET_ALIASES: values also given under a second name."""
    for name, alias in aliases.items():
        if name in result:
            result[alias] = result[name]
    return result


def tags_resource(name: str, path: str, kind: str) -> Resource:
    """The ``tags`` resource of the cluster or of one object of ``kind``."""

    def object_name(call: Call) -> str | None:
        return None if kind == C.TAG_CLUSTER else call.items[0]

    async def get(call: Call) -> Any:
        return list(await call.luxi.call("QueryTags", kind, object_name(call) or ""))

    def inputs(call: Call) -> tuple[Any, dict[str, Any]]:
        static = {
            "kind": kind,
            "name": object_name(call),
            "tags": call.query.get("tag", []),
            "dry_run": call.dry_run,
        }
        return {}, static

    what = "the cluster" if kind == C.TAG_CLUSTER else f"a {kind}"
    return Resource(
        name,
        path,
        {
            "GET": method(get, f"The tags of {what}"),
            "PUT": opcode("OP_TAGS_SET", f"Add tags (?tag=...) to {what}", inputs),
            "DELETE": opcode("OP_TAGS_DEL", f"Remove tags (?tag=...) from {what}", inputs),
        },
    )


def on_item(field: str | None, *, body: bool = True, **static: Callable[[Call], Any]) -> OpInputs:
    """Inputs for an opcode on the path's object: the body (unless ``body`` is
    False: Ganeti ignores it there), the object's name as ``field`` and the
    ``static`` values computed from the request (query arguments)."""

    def inputs(call: Call) -> tuple[Any, dict[str, Any]]:
        values = {name: get(call) for name, get in static.items()}
        if field:
            values[field] = call.items[0]
        return (call.body if body else {}), values

    return inputs


# Query arguments, as the static values of on_item.
def DRY_RUN(call: Call) -> bool:
    return call.dry_run


def FORCE(call: Call) -> bool:
    return call.force


def flag_arg(name: str) -> Callable[[Call], bool]:
    return lambda call: call.flag(name)


def split_fields(text: str) -> list[str]:
    return [name.strip() for name in text.split(",")]


def query_fields_arg(call: Call) -> list[str]:
    fields = call.str_arg("fields")
    if fields is None:
        raise bad_request("Missing 'fields' query argument")
    return split_fields(fields)
