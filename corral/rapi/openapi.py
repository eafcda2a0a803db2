"""The OpenAPI 3 description of the RAPI, made from the resource table."""

from __future__ import annotations

import functools
from typing import Any

from corral import __version__
from corral.rapi.call import Call
from corral.rapi.table import OPEN, Method, Resource, method

PATH = "/2/openapi.json"
_ERROR = {"$ref": "#/components/responses/Error"}
# Query arguments Ganeti's resources take, by what they do.
_QUERY_ARGS = {
    "bulk": "1: whole objects instead of names and URIs",
    "dry-run": "1: check only, change nothing",
    "force": "1: force the operation",
}


def _operation(resource: Resource, verb: str, meth: Method) -> dict[str, Any]:
    responses: dict[str, Any] = {
        "200": {
            "description": "A job id (a number)" if meth.returns == "job" else "The answer",
            "content": {
                "application/json": {"schema": {"type": "integer"} if meth.returns == "job" else {}}
            },
        },
        "400": _ERROR,
        "404": _ERROR,
        "500": _ERROR,
        "501": _ERROR,
        "502": _ERROR,
    }
    # Credentials are checked whenever sent, so a wrong one is refused anywhere,
    # and attempts after failed ones may be refused for a while (429).
    responses["401"] = _ERROR
    responses["429"] = _ERROR
    if meth.access or verb not in ("GET", "HEAD"):
        responses["403"] = _ERROR  # no right; or a write caused by another site's page
    if meth.returns == "job" or resource.name == "instances_name_console":
        responses["503"] = _ERROR  # a full or drained queue; a stopped console
    if verb in ("PUT", "POST"):
        responses["408"] = _ERROR  # the body came too slowly
        responses["413"] = _ERROR
        responses["415"] = _ERROR
    operation: dict[str, Any] = {
        "operationId": f"{verb.lower()}_{resource.name}",
        "summary": meth.summary,
        "parameters": [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in resource.placeholders
        ]
        + [
            {
                "name": arg,
                "in": "query",
                "required": False,
                "description": text,
                "schema": {"type": "integer", "enum": [0, 1]},
            }
            for arg, text in _QUERY_ARGS.items()
        ],
        "responses": responses,
    }
    if meth.opcode:
        operation["x-ganeti-opcode"] = meth.opcode
    if meth.access:
        operation["security"] = [{"basic": []}]
        operation["x-access"] = sorted(meth.access)
    if verb in ("PUT", "POST"):
        operation["requestBody"] = {
            "required": False,
            "content": {"application/json": {"schema": {}}},
        }
    return operation


def describe(resources: list[Resource]) -> dict[str, Any]:
    """The OpenAPI document of ``resources``."""
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "Corral remote API (Ganeti RAPI v2)",
            "version": __version__,
        },
        "paths": {
            r.path: {verb.lower(): _operation(r, verb, m) for verb, m in r.methods.items()}
            for r in resources
        },
        "components": {
            "securitySchemes": {"basic": {"type": "http", "scheme": "basic"}},
            "responses": {
                "Error": {
                    "description": "An error",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "code": {"type": "integer"},
                                    "message": {"type": "string"},
                                    "explain": {"type": "string"},
                                },
                            }
                        }
                    },
                }
            },
        },
    }


def resource(resources: list[Resource]) -> Resource:
    """The resource serving the description of ``resources`` (and itself)."""

    @functools.cache
    def document() -> dict[str, Any]:
        return describe([*resources, served])

    async def get(call: Call) -> Any:
        return document()

    served = Resource("openapi", PATH, {"GET": method(get, "This description", OPEN)})
    return served
