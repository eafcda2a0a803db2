"""Asyncio client of the node RPC: calls one or many nodes in parallel.

The client encodes calls, chooses their timeouts (a query's deadline, the
memory of unreachable nodes: :mod:`corral.rpc.reachability`) and hands them to
a :class:`~corral.rpc.transport.Transport`: HTTPS in production
(:class:`corral.rpc.https.HttpsTransport`), the node handlers in-process in
tests.  A call never raises because of a node: every node's outcome is an
:class:`RpcResult`, and the caller decides what a failure means
(``raise_if_failed``).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from corral import errors
from corral.rpc.calls import get_call
from corral.rpc.reachability import (
    DEFAULT_MEMORY,
    DEFAULT_QUERY_DEADLINE,
    Reachability,
    current_deadline,
)
from corral.rpc.transport import Transport, TransportError, WireRequest

log = logging.getLogger(__name__)

# A node that does not accept a connection and finish the TLS handshake within
# this time counts as offline, whatever the call's own (maybe longer) timeout is.
# The call's timeout bounds everything, waiting for a free connection to the
# node included: calls to many nodes run in parallel, so a silent node costs a
# call no more than that.
CONNECT_TIMEOUT = 10.0
# The connect timeout for a node remembered as unreachable (see reachability):
# a logical unit still tries it, but does not wait long for what failed lately.
REMEMBERED_CONNECT_TIMEOUT = 2.0


@dataclass
class RpcResult:
    """The outcome of one call on one node.

    ``fail_msg`` is None on success; ``offline`` is True when the node could not
    be reached at all (connection refused or timed out).
    """

    node: str
    call: str
    payload: Any = None
    fail_msg: str | None = None
    offline: bool = False

    @property
    def failed(self) -> bool:
        """Whether the call failed (the node was unreachable or returned an error)."""
        return self.fail_msg is not None

    def raise_if_failed(self, prefix: str = "") -> None:
        """Raise OpExecError with a one-line message if the call failed."""
        if self.fail_msg is None:
            return
        msg = f"{prefix}: {self.fail_msg}" if prefix else self.fail_msg
        raise errors.OpExecError(msg.strip())


def _parse_reply(status: int, body: bytes) -> tuple[Any, str | None]:
    """``(payload, fail_msg)`` from noded's HTTP answer."""
    try:
        reply = json.loads(body)
    except ValueError:
        reply = None
    if not (isinstance(reply, list) and len(reply) == 2 and isinstance(reply[0], bool)):
        text = body[:200].decode("utf-8", "replace").strip()
        return None, f"Invalid reply from node (HTTP {status}): {text!r}"
    success, payload = reply
    if status != 200 or not success:
        return None, str(payload)
    return payload, None


class RpcClient:
    """Calls nodes through ``transport``.

    Calls made under :func:`corral.rpc.reachability.query_deadline` answer by
    that deadline and skip nodes remembered as unreachable (``reachability``,
    which remembers failures for ``unreachable_memory`` seconds);
    ``query_deadline`` is the deadline queries take.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        query_deadline: float = DEFAULT_QUERY_DEADLINE,
        unreachable_memory: float = DEFAULT_MEMORY,
    ) -> None:
        self.transport = transport
        self.query_deadline = query_deadline
        self.reachability = Reachability(unreachable_memory)
        # address → the background call that checks whether a remembered node is back
        self._probes: dict[str, asyncio.Task[RpcResult]] = {}

    async def close(self) -> None:
        """Close the connections to all nodes."""
        for task in list(self._probes.values()):
            task.cancel()
        await self.transport.close()

    async def __aenter__(self) -> RpcClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def call(
        self,
        nodes: Sequence[tuple[str, str]],
        name: str,
        args: Sequence[Any],
        *,
        timeout: float | None = None,
    ) -> dict[str, RpcResult]:
        """Call ``name`` on all ``(node_key, address)`` pairs in parallel."""
        get_call(name).check_args(args)
        results = await asyncio.gather(
            *(self.call_one(node, address, name, args, timeout=timeout) for node, address in nodes)
        )
        return {result.node: result for result in results}

    async def call_one(
        self,
        node: str,
        address: str,
        name: str,
        args: Sequence[Any],
        *,
        timeout: float | None = None,
    ) -> RpcResult:
        """Call ``name`` on one node; ``timeout`` overrides the table's.

        Under a query deadline the call ends by it, and a node remembered as
        unreachable is not asked: its result is at once a failure (offline).
        """
        call = get_call(name)
        body = self._encode(name, call.check_args(args))
        seconds = timeout if timeout is not None else call.timeout_for(args)
        connect = CONNECT_TIMEOUT
        down = self.reachability.down(address)
        deadline = current_deadline()
        if deadline is not None:
            if down is not None:
                self._probe(node, address)
                log.info("Query did not ask node %s (%s): %s", node, address, down.describe())
                msg = f"Node {node} not asked: {down.describe()}"
                return RpcResult(node, name, fail_msg=msg, offline=True)
            seconds = min(seconds, deadline - time.monotonic())
            if seconds <= 0:
                msg = f"RPC call {name} to {address} not made: the query's deadline passed"
                return RpcResult(node, name, fail_msg=msg)
        elif down is not None:
            connect = REMEMBERED_CONNECT_TIMEOUT
        request = WireRequest(node, address, name, body, seconds, connect)
        result, reached = await self._attempt(request)
        if reached:
            self.reachability.answered(address)
        elif reached is not None:
            self.reachability.failed(node, address, result.fail_msg or "no answer")
        return result

    async def _attempt(self, request: WireRequest) -> tuple[RpcResult, bool | None]:
        """The call's result, and whether the node answered (None: cannot tell)."""
        node, name = request.node, request.call
        try:
            reply = await self.transport.send(request)
        except TransportError as err:
            return RpcResult(node, name, fail_msg=err.message, offline=err.offline), err.reached
        except TimeoutError:
            seconds = round(request.timeout, 3)
            msg = f"RPC call {name} to {request.address} timed out after {seconds:g} s"
            return RpcResult(node, name, fail_msg=msg), False
        payload, fail_msg = _parse_reply(reply.status, reply.body)
        if fail_msg is not None:
            log.debug("RPC %s on %s failed: %s", name, node, fail_msg)
        return RpcResult(node, name, payload=payload, fail_msg=fail_msg), True

    def _probe(self, node: str, address: str) -> None:
        """Ask a remembered node, in the background, whether it is back
        (at most one such call per node at a time, every PROBE_INTERVAL)."""
        if address in self._probes or not self.reachability.probe_due(address):
            return
        # An empty context: the probe is no part of the query that noticed the node.
        task = asyncio.create_task(
            self.call_one(node, address, "version", [], timeout=self.query_deadline),
            context=contextvars.Context(),
        )
        self._probes[address] = task
        task.add_done_callback(lambda _: self._probes.pop(address, None))

    @staticmethod
    def _encode(name: str, args: list[Any]) -> bytes:
        try:
            return json.dumps(args).encode("utf-8")
        except (TypeError, ValueError) as err:
            raise errors.ProgrammerError(f"Cannot encode arguments of {name}: {err}") from None
