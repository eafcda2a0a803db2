"""Asyncio client of the node RPC: calls one or many nodes in parallel.

The client encodes calls, chooses their timeouts (a query's deadline, the
memory of unreachable nodes: :mod:`corral.rpc.reachability`) and hands them to
a :class:`~corral.rpc.transport.Transport`: HTTPS in production
(:class:`corral.rpc.https.HttpsTransport`), the node handlers in-process in
tests.

Calls take a request made from a call's declaration (:mod:`corral.rpc.declare`):
``run`` returns its payload or raises NodeCallError, ``attempt`` reports a
failure through a warning, ``result`` and ``results`` return each node's
:class:`~corral.rpc.result.RpcResult` (see :mod:`corral.rpc.result`).  A
request built from a call object and a list (``Request(call, args)``) is sent
as it is: tests of noded's refusals send what no declaration would.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from corral import errors
from corral.rpc import versions
from corral.rpc.calls_node import version
from corral.rpc.declare import NodeCall, Request
from corral.rpc.fencing import DEPOSED_STATUS
from corral.rpc.reachability import (
    DEFAULT_MEMORY,
    DEFAULT_QUERY_DEADLINE,
    Reachability,
    current_deadline,
)
from corral.rpc.result import NodeAddress, NodeTarget, RpcResult
from corral.rpc.transport import Transport, TransportError, WireRequest, parse_reply
from corral.state.ports import NO_FENCE

R = TypeVar("R")

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


class RpcClient:
    """Calls nodes through ``transport``.

    Calls made under :func:`corral.rpc.reachability.query_deadline` answer by
    that deadline and skip nodes remembered as unreachable (``reachability``,
    which remembers failures for ``unreachable_memory`` seconds);
    ``query_deadline`` is the deadline queries take.

    Calls that change their node carry ``fence``, the fence token of the
    master that makes them (masterd sets its lease's; see
    :mod:`corral.rpc.fencing`); a node that has seen a newer one refuses
    them, and their results raise :class:`~corral.rpc.result.MasterDeposed`.
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
        self.fence = NO_FENCE
        # When the master's lease ends (epoch s; masterd sets it, None: no
        # end): no fenced call is sent after it (frozen, cut off) and a node
        # refuses one that comes after it, as a node its successor has not
        # called yet would take it.
        self.fence_until: Callable[[], float | None] = lambda: None
        self.reachability = Reachability(unreachable_memory)
        # Told each call made: (node uuid, seconds, outcome) with outcome "ok",
        # "error" (the node answered a failure) or "unreachable" (no answer);
        # masterd's metrics count them.
        self.call_timer: Callable[[str, float, str], None] = lambda node, seconds, outcome: None
        # address → the background call that checks whether a remembered node is back
        self._probes: dict[str, asyncio.Task[RpcResult[int]]] = {}

    async def close(self) -> None:
        """Close the connections to all nodes."""
        for task in list(self._probes.values()):
            task.cancel()
        await self.transport.close()

    async def __aenter__(self) -> RpcClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # Typed calls
    async def run(
        self,
        node: NodeTarget,
        request: Request[R],
        what: str = "",
        *,
        ecode: str | None = None,
        timeout: float | None = None,
    ) -> R:
        """The payload of ``request`` on ``node``; NodeCallError (its message
        ``"<what>: <the node's message>"``) if the call failed, or
        OpPrereqError with ``ecode`` if one is given."""
        result = await self.result(node, request, timeout=timeout)
        return result.get(what, ecode)

    async def attempt(
        self,
        node: NodeTarget,
        request: Request[R],
        warn: Callable[[str], None],
        what: str = "",
        *,
        timeout: float | None = None,
    ) -> RpcResult[R]:
        """The outcome of ``request`` on ``node``, a failure reported through
        ``warn`` (``"<what>: <the node's message>"``) and not raised."""
        result = await self.result(node, request, timeout=timeout)
        result.report(warn, what)
        return result

    async def result(
        self, node: NodeTarget, request: Request[R], *, timeout: float | None = None
    ) -> RpcResult[R]:
        """The outcome of ``request`` on ``node`` (``timeout`` overrides the call's)."""
        return await self._send(node.uuid, node.primary_ip, request.call, request.args, timeout)

    async def results(
        self,
        nodes: Iterable[NodeTarget],
        request: Request[R],
        *,
        timeout: float | None = None,
    ) -> dict[str, RpcResult[R]]:
        """The outcomes of ``request`` on ``nodes``, called in parallel, by node uuid."""
        outcomes = await asyncio.gather(
            *(
                self._send(node.uuid, node.primary_ip, request.call, request.args, timeout)
                for node in nodes
            )
        )
        return {outcome.node: outcome for outcome in outcomes}

    async def _send(
        self,
        node: str,
        address: str,
        call: NodeCall[..., R],
        args: list[Any],
        timeout: float | None,
    ) -> RpcResult[R]:
        """Send one call to one node.

        Under a query deadline the call ends by it, and a node remembered as
        unreachable is not asked: its result is at once a failure (offline).
        """
        name = call.name
        body = self._encode(name, args)
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
        fence = self.fence if call.fenced else None
        until = self.fence_until() if fence is not None else None
        if until is not None and time.time() >= until:
            msg = (
                f"RPC call {name} to {address} not made: this master daemon's lease"
                f" (fence token {fence}) may have run out"
            )
            log.error("Fenced call refused: %s", msg)
            return RpcResult(node, name, fail_msg=msg, deposed=True)
        request = WireRequest(node, address, name, body, seconds, connect, fence, until)
        started = time.monotonic()
        result, reached = await self._attempt(request)
        outcome = "unreachable" if not reached else "ok" if result.fail_msg is None else "error"
        self.call_timer(node, time.monotonic() - started, outcome)
        if reached:
            self.reachability.answered(address)
        elif reached is not None:
            self.reachability.failed(node, address, result.fail_msg or "no answer")
        return result

    async def _attempt(self, request: WireRequest) -> tuple[RpcResult[Any], bool | None]:
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
        payload, fail_msg = parse_reply(reply.status, reply.body)
        # A node too far from this master's version: its answer is not used.
        mismatch = versions.too_far(versions.OWN, reply.version, request.address)
        if mismatch is not None:
            payload, fail_msg = None, mismatch
        elif fail_msg is not None:
            fail_msg = versions.failure(
                name, reply.version, request.address, fail_msg, reply.status
            )
        if fail_msg is not None:
            log.debug("RPC %s on %s failed: %s", name, node, fail_msg)
        deposed = reply.status == DEPOSED_STATUS
        if deposed:
            log.error("Node %s refused %s: %s", node, name, fail_msg)
        result: RpcResult[Any] = RpcResult(
            node, name, payload=payload, fail_msg=fail_msg, deposed=deposed
        )
        return result, True

    def _probe(self, node: str, address: str) -> None:
        """Ask a remembered node, in the background, whether it is back
        (at most one such call per node at a time, every PROBE_INTERVAL)."""
        if address in self._probes or not self.reachability.probe_due(address):
            return
        # An empty context: the probe is no part of the query that noticed the node.
        target = NodeAddress(node, address)
        task = asyncio.create_task(
            self.result(target, version(), timeout=self.query_deadline),
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
