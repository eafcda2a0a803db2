"""One node call from its encoded request to noded's encoded answer.

The door of the node: the call is looked up in the table, its arguments are
read and checked, the handler runs, and its result or failure becomes the
JSON ``[success, payload]`` with an HTTP status.  noded's HTTPS server
(:mod:`corral.node.server`) and the in-process transport
(:mod:`corral.node.local`) both serve calls through :func:`run_call`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from corral import errors
from corral.daemons.util import one_line
from corral.node.context import NodeContext
from corral.node.handlers import get_handler
from corral.rpc.calls import CALLS
from corral.rpc.transport import WireReply

log = logging.getLogger(__name__)


def _text(err: BaseException) -> str:
    text = err.message if isinstance(err, errors.GenericError) else str(err)
    return text.strip() or err.__class__.__name__


def reply(success: bool, payload: Any, status: int = 200) -> WireReply:
    """noded's answer: ``[success, payload]`` as JSON."""
    return WireReply(status, json.dumps([success, payload]).encode("utf-8"))


def _read_args(name: str, body: bytes) -> list[Any]:
    try:
        args = json.loads(body)
    except ValueError as err:
        raise errors.ParameterError(f"Invalid JSON body for {name}: {err}") from None
    if not isinstance(args, list):
        raise errors.ParameterError(f"The body of {name} must be a JSON list of arguments")
    try:
        return CALLS[name].check_args(args)
    except errors.ProgrammerError as err:
        raise errors.ParameterError(err.message) from None


async def run_call(ctx: NodeContext, name: str, body: bytes) -> WireReply:
    """Run the handler of the call ``name`` with the arguments in ``body``."""
    handler = get_handler(name)
    if handler is None:
        return reply(False, f"Unknown RPC call {name!r}", status=404)
    try:
        args = _read_args(name, body)
    except errors.ParameterError as err:
        return reply(False, err.message, status=400)
    try:
        return reply(True, await handler(ctx, *args))
    except errors.GenericError as err:
        # Only the first line: the rest may be a script's output, which may quote
        # a secret parameter, and the log is on disk.
        log.warning("RPC %s failed: %s", name, _text(err).splitlines()[0])
        # The first line says what failed; further lines (a script's output) stay lines.
        return reply(False, _text(err))
    except Exception as err:
        log.exception("RPC %s failed", name)
        return reply(False, f"{err.__class__.__name__}: {one_line(err)}")
