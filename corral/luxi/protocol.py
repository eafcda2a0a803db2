"""Luxi message framing: one JSON document per message, ended by ``\\x03``.

Requests are ``{"method": M, "args": A, "version": V}``; responses are
``{"success": bool, "result": R, "version": V}``.  On failure ``result`` is an
encoded error, ``[class_name, args]``.  This module is stdlib-only so the
command-line clients stay fast to start.
"""

from __future__ import annotations

import json
import math
import re

from corral import constants as C
from corral import errors

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

ETX = b"\x03"
KEY_METHOD = "method"
KEY_ARGS = "args"
KEY_SUCCESS = "success"
KEY_RESULT = "result"
KEY_VERSION = "version"

# Default limits of masterd (its --luxi-max-message-size and --luxi-max-buffered):
# the largest request, and the bytes of requests being received on all
# connections together.  A request is parsed into Python objects of up to ~25
# times its size; the largest legitimate ones (SubmitManyJobs of thousands of
# opcodes) are a few megabytes.
MAX_MESSAGE_SIZE = 16 * 1024 * 1024
MAX_BUFFERED = 64 * 1024 * 1024

METHODS = frozenset(
    {
        "SubmitJob",
        "SubmitJobToDrainedQueue",
        "SubmitManyJobs",
        "WaitForJobChange",
        "PickupJob",
        "CancelJob",
        "ArchiveJob",
        "AutoArchiveJobs",
        "ChangeJobPriority",
        "QueryJobs",
        "Query",
        "QueryFields",
        "QueryClusterInfo",
        "QueryConfigValues",
        "QueryTags",
        "QueryInstances",
        "QueryNodes",
        "QueryGroups",
        "QueryNetworks",
        "QueryExports",
        "SetDrainFlag",
        "SetWatcherPause",
        "QueryFilters",
        "ReplaceFilter",
        "DeleteFilter",
        # Corral's own: gnt-node join-token (Ganeti adds nodes over SSH).
        "CreateJoinToken",
        # Corral's own: gnt-cluster master-failover (corral.master.standby).
        "TakeMastership",
        # Corral's own: masterd's metrics (corral.metrics.master).
        "CorralMetrics",
    }
)

# No circular-reference check: it costs a dict insertion and deletion per list
# and dict, half the time of encoding a big answer; a cycle (a bug) still fails,
# with RecursionError instead of ValueError.
_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False)


def dumps(value: Any) -> bytes:
    """Compact JSON bytes.

    A lone surrogate (from a ``\\udc80``-style escape in a request, quoted back in
    an error) goes out as that same JSON escape, not as invalid UTF-8.
    """
    return _encoder.encode(value).encode("utf-8", "backslashreplace")


def encode_request(method: str, args: Any) -> bytes:
    """One framed request."""
    return dumps({KEY_METHOD: method, KEY_ARGS: args, KEY_VERSION: C.LUXI_VERSION}) + ETX


# Integers a request may carry: 64 bits, as Ganeti's own daemons read them.
_INT_RANGE = range(-(1 << 63), 1 << 63)
# Lists and objects inside each other, at most: deeper than any real request
# (an opcode in SubmitManyJobs is ~8 deep), shallow enough for every part of
# masterd that walks a value recursively.
MAX_DEPTH = 128
# How a lone surrogate can arrive: only as an escape (raw, it is not UTF-8).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _parse_int(text: str) -> int:
    value = int(text)
    if value not in _INT_RANGE:
        raise ValueError(f"number {text[:40]}{'...' if len(text) > 40 else ''} out of range")
    return value


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} out of range")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _depth_within(value: Any, limit: int) -> bool:
    """Whether ``value`` nests at most ``limit`` lists and objects deep."""
    level = [value]
    for _depth in range(limit + 1):
        inner: list[Any] = []
        for item in level:
            kind = type(item)
            if kind is list:
                inner += item
            elif kind is dict:
                inner += item.values()
        if not inner:
            return True
        level = inner
    return False


def load_json(data: bytes) -> Any:
    """Parse JSON from a client, refusing what Ganeti's daemons cannot take:
    NaN and infinities, integers beyond 64 bits, lone surrogates and nesting
    too deep for the parser (ValueError saying which)."""
    try:
        value = json.loads(
            data, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_refuse_constant
        )
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    except ValueError as err:  # UnicodeDecodeError too
        raise ValueError(f"not JSON: {err}") from None
    if not _depth_within(value, MAX_DEPTH):
        raise ValueError(f"JSON nested more than {MAX_DEPTH} levels deep")
    if _SURROGATE_ESCAPE.search(data):
        try:
            _encoder.encode(value).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("a string has a lone surrogate") from None
    return value


def parse_request(data: bytes) -> tuple[str, Any]:
    """Parse one request (without the terminator) into ``(method, args)``
    (the JSON as :func:`load_json` takes it)."""
    try:
        msg = load_json(data)
    except ValueError as err:
        raise errors.LuxiError(f"Malformed request: {err}") from None
    if not isinstance(msg, dict) or KEY_METHOD not in msg or KEY_ARGS not in msg:
        raise errors.LuxiError("Malformed request: expected an object with 'method' and 'args'")
    method = msg[KEY_METHOD]
    version = msg.get(KEY_VERSION)
    if version is not None and version != C.LUXI_VERSION:
        raise errors.LuxiError(f"Luxi version mismatch: client {version}, server {C.LUXI_VERSION}")
    if not isinstance(method, str) or method not in METHODS:
        raise errors.LuxiError(f"Unknown luxi method {method!r}")
    return method, msg[KEY_ARGS]


class UndecodableArguments(errors.LuxiError):
    """A known method's arguments cannot be read.

    luxid answers such a request with a plain "Failed to parse request" string,
    not an encoded error, and so does the server.
    """


class Encoded:
    """A result that is already JSON text (a big answer assembled from parts)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def encode_response(success: bool, result: Any) -> bytes:
    """One framed response."""
    if isinstance(result, Encoded):
        head = dumps({KEY_SUCCESS: success})[:-1]
        return head + b',"' + KEY_RESULT.encode() + b'":' + result.text.encode() + b"}" + ETX
    return dumps({KEY_SUCCESS: success, KEY_RESULT: result}) + ETX


def encode_error(err: BaseException) -> bytes:
    """A framed failure response carrying ``err``."""
    return encode_response(False, errors.encode_exception(err))


def parse_response(data: bytes) -> Any:
    """Return the result of a response, or raise the error it carries."""
    try:
        msg = json.loads(data)
    except (UnicodeDecodeError, ValueError) as err:
        raise errors.LuxiError(f"Malformed response from masterd: {err}") from None
    if not isinstance(msg, dict) or KEY_SUCCESS not in msg or KEY_RESULT not in msg:
        raise errors.LuxiError("Malformed response from masterd")
    version = msg.get(KEY_VERSION)
    if version is not None and version != C.LUXI_VERSION:
        raise errors.LuxiError(f"Luxi version mismatch, client {C.LUXI_VERSION}, server {version}")
    if msg[KEY_SUCCESS]:
        return msg[KEY_RESULT]
    result = msg[KEY_RESULT]
    if isinstance(result, str):
        raise errors.RequestError(result)
    raise errors.decode_exception(result)
