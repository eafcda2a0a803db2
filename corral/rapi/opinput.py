"""Opcodes from RAPI requests: body and query merged, validated by the same
declarations as luxi submissions (corral.opcodes), refused with 400."""

from __future__ import annotations

from typing import Any

from corral import errors
from corral.opcodes import from_dict, registry
from corral.opcodes.base import OP_ID_KEY
from corral.rapi.call import Call, check_type
from corral.rapi.errors import HttpError, bad_request


def not_built(op_id: str) -> HttpError:
    """The answer for a resource whose operation Corral does not have yet."""
    return HttpError(501, f"{op_id} is not implemented by Corral yet")


def fill_opcode(
    op_id: str,
    body: Any,
    static: dict[str, Any],
    rename: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The opcode's wire dict from a request (Ganeti's FillOpcode).

    ``static`` values come from the path and query and cannot be given in the
    body; ``rename`` maps RAPI names to opcode fields (``os`` → ``os_type``).
    """
    if op_id not in registry():
        raise not_built(op_id)
    params = {} if body is None else dict(check_type(body, dict, "Body contents"))
    for old, new in (rename or {}).items():
        if old in params and new in params:
            raise bad_request(f"Parameter '{old}' was renamed to '{new}', but both are specified")
        if old in params:
            params[new] = params.pop(old)
    overwritten = sorted(set(params) & set(static))
    if overwritten:
        raise bad_request(f"Can't overwrite static parameters {overwritten!r}")
    params.update(static)
    if OP_ID_KEY in params:
        raise bad_request(f"Invalid body parameters: '{OP_ID_KEY}' is set by the resource")
    data = {OP_ID_KEY: op_id, **params}
    try:
        from_dict(data)
    except errors.GenericError as err:
        raise bad_request(f"Invalid body parameters: {err.message}") from None
    return data


def depends_of(call: Call) -> dict[str, Any]:
    """The common ``depends`` field, honoured from any object body."""
    if isinstance(call.body, dict) and call.body.get("depends"):
        return {"depends": call.body["depends"]}
    return {}
