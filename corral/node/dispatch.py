"""One node call from its encoded request to noded's encoded answer.

The door of the node: the call is looked up in the table, its arguments are
read and checked, the handler runs, and its result or failure becomes the
JSON ``[success, payload]`` with an HTTP status.  noded's HTTPS server
(:mod:`corral.node.server`) and the in-process transport
(:mod:`corral.node.local`) both serve calls through :func:`run_call`.

The arguments are checked against the call's declared types (pydantic, strict:
no conversion) before the handler sees them: a malformed call is refused with
HTTP 400 and the argument that is wrong.  A call that changes the node must
carry a fence token not older than the newest the node has seen
(:mod:`corral.node.fencing`), else it is refused with HTTP 409; a node
context without membership (handlers tested alone) has no token to keep.
"""

from __future__ import annotations

import functools
import json
import logging
import typing
from types import GenericAlias
from typing import Any

from pydantic import TypeAdapter, ValidationError

from corral import errors
from corral.node.context import NodeContext
from corral.node.fencing import StaleToken
from corral.node.handlers import get_handler
from corral.process.daemons import one_line
from corral.rpc import versions
from corral.rpc.calls import CALLS
from corral.rpc.fencing import DEPOSED_STATUS
from corral.rpc.transport import WireReply
from corral.state.ports import NO_FENCE

log = logging.getLogger(__name__)


def _text(err: BaseException) -> str:
    text = err.message if isinstance(err, errors.GenericError) else str(err)
    return text.strip() or err.__class__.__name__


def reply(success: bool, payload: Any, status: int = 200) -> WireReply:
    """noded's answer: ``[success, payload]`` as JSON."""
    return WireReply(status, json.dumps([success, payload]).encode("utf-8"), versions.OWN)


@functools.cache
def _arguments(name: str) -> TypeAdapter[tuple[Any, ...]]:
    """The validator of the call's arguments, made on first use (a few ms)."""
    call = CALLS[name]
    hints = typing.get_type_hints(call.signature)
    shape: Any = GenericAlias(tuple, tuple(hints[arg] for arg in call.args))
    return TypeAdapter(shape)


def _refusal(name: str, err: ValidationError) -> str:
    """What is wrong with the arguments, in one line: the first problem."""
    first = err.errors(include_url=False)[0]
    where, *inside = first["loc"]
    arg = CALLS[name].args[int(where)]
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in inside)
    # Not the value itself: it may be a secret parameter.
    return f"Invalid argument {arg}{path} of {name}: {first['msg']}"


def _read_args(name: str, body: bytes) -> list[Any]:
    """The arguments, checked against the call's declaration."""
    try:
        args = json.loads(body)
    except ValueError as err:
        raise errors.ParameterError(f"Invalid JSON body for {name}: {err}") from None
    if not isinstance(args, list):
        raise errors.ParameterError(f"The body of {name} must be a JSON list of arguments")
    try:
        CALLS[name].check_args(args)
    except errors.ProgrammerError as err:
        raise errors.ParameterError(err.message) from None
    try:
        # JSON mode: the body's arrays are what tuples are declared for.
        return list(_arguments(name).validate_json(body, strict=True))
    except ValidationError as err:
        raise errors.ParameterError(_refusal(name, err)) from None


async def run_call(
    ctx: NodeContext, name: str, body: bytes, fence: int | None = None, until: float | None = None
) -> WireReply:
    """Run the handler of the call ``name`` with the arguments in ``body``;
    ``fence``: the caller's fence token (None: it sent none), ``until``: when
    its lease ends (None: not said)."""
    handler = get_handler(name)
    if handler is None:
        return reply(False, f"Unknown RPC call {name!r}", status=404)
    try:
        args = _read_args(name, body)
    except errors.ParameterError as err:
        return reply(False, err.message, status=400)
    try:
        # After the arguments' check: a malformed call changes nothing, the token neither.
        if ctx.membership is not None and CALLS[name].fenced:
            await ctx.membership.fence.admit(name, NO_FENCE if fence is None else fence, until)
        return reply(True, await handler(ctx, *args))
    except StaleToken as err:
        return reply(False, err.message, status=DEPOSED_STATUS)
    except errors.GenericError as err:
        # Only the first line: the rest may be a script's output, which may quote
        # a secret parameter, and the log is on disk.
        log.warning("RPC %s failed: %s", name, _text(err).splitlines()[0])
        # The first line says what failed; further lines (a script's output) stay lines.
        return reply(False, _text(err))
    except Exception as err:
        log.exception("RPC %s failed", name)
        return reply(False, f"{err.__class__.__name__}: {one_line(err)}")
