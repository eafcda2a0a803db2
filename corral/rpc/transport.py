"""What carries a node call: the seam under :class:`corral.rpc.client.RpcClient`.

The client encodes the call, picks its timeouts and keeps the memory of
unreachable nodes; a transport only delivers the encoded request to one node
and hands back noded's answer (as httpx's ``BaseTransport`` under its client).
Production uses :class:`corral.rpc.https.HttpsTransport` (mutual TLS);
:class:`corral.node.local.LocalTransport` runs the real node handlers
in-process on per-node roots.

Stdlib only.
"""

from __future__ import annotations

import json
import os
import ssl
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from corral.rpc.versions import UNVERSIONED, Version

if TYPE_CHECKING:
    from corral.rpc.join_channel import JoinChannel


@dataclass(frozen=True, slots=True)
class WireRequest:
    """One encoded call to one node."""

    node: str  # the caller's key of the node (for messages)
    address: str
    call: str
    body: bytes  # the JSON list of arguments
    timeout: float  # seconds for the whole call
    connect_timeout: float  # seconds to reach the node (and authenticate it)
    # The caller's fence token, on calls that change the node (None: none sent).
    fence: int | None = None
    # When the caller's lease ends (epoch s), sent with the token (None: none sent).
    fence_until: float | None = None


@dataclass(frozen=True, slots=True)
class WireReply:
    """noded's answer: an HTTP status and the JSON ``[success, payload]``."""

    status: int
    body: bytes
    # The node's version, as its answer said (corral.rpc.versions).
    version: Version = UNVERSIONED


def parse_reply(status: int, body: bytes) -> tuple[Any, str | None]:
    """``(payload, fail_msg)`` from noded's HTTP answer (fail_msg None: success)."""
    try:
        reply = json.loads(body)
    except ValueError:
        reply = None
    if not (isinstance(reply, list) and len(reply) == 2 and isinstance(reply[0], bool)):
        text = body[:200].decode("utf-8", "replace").strip()
        return None, f"Invalid reply from node (HTTP {status}): {text!r}"
    success, payload = reply
    if status != 200 or not success:
        # A failure always says something (callers show ``fail_msg or ...``).
        return None, str(payload) or f"Failed without a message (HTTP {status})"
    return payload, None


def failure_reason(err: BaseException) -> str:
    """Why a connection to a node failed, in a few words."""
    if isinstance(err, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {err.verify_message}"
    if isinstance(err, ssl.SSLError):
        return str(err.reason or err)
    errno = getattr(err, "errno", None)
    if errno:
        return os.strerror(errno)
    return str(err) or err.__class__.__name__


class TransportError(Exception):
    """The call did not get an answer from the node.

    ``offline``: the node could not be reached at all; ``reached`` tells the
    memory of unreachable nodes what happened (False: the node did not answer;
    None: cannot tell, e.g. a TLS error from a node that is there but not one
    we trust).  A transport raises TimeoutError when the call's own timeout
    expires.
    """

    def __init__(self, message: str, *, offline: bool, reached: bool | None) -> None:
        super().__init__(message)
        self.message = message
        self.offline = offline
        self.reached = reached


class Transport(Protocol):
    """Delivers encoded calls to nodes (and a master's join exchanges to nodes
    that wait to join)."""

    async def send(self, request: WireRequest) -> WireReply:
        """noded's answer to ``request``; TransportError or TimeoutError if none came."""
        ...

    def join_channel(self, address: str) -> JoinChannel:
        """A connection (not yet made) to the node waiting to join at ``address``."""
        ...

    async def close(self) -> None:
        """Release the connections (the transport may be used again afterwards)."""
        ...
