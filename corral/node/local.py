"""Node calls served in this process: the real handlers on per-node roots.

:class:`LocalTransport` is a :class:`corral.rpc.transport.Transport` (as
httpx's ``ASGITransport`` runs the real application in-process): each node is
a :class:`NodeContext` on a root directory of its own, and a call runs
noded's door and handler (:func:`corral.node.dispatch.run_call`) on it, with
the request and answer encoded as on the wire and the call's timeout in
force.  No socket, no TLS, no daemon: a master's logical units run against
real nodes in milliseconds.

A node that waits to join (no cluster certificates in its root) answers
only the join exchange, on a :class:`LocalJoinChannel`, as noded does.  A
node can be made unreachable (``reachable = False``): its calls then fail as
a refused connection does; or made to go down in the middle of an operation
(:meth:`LocalNode.go_down_at`), to see what the master does then.
"""

from __future__ import annotations

import asyncio
import errno
import os
from dataclasses import dataclass
from typing import Any

from corral.node import join_protocol as J
from corral.node.context import NodeContext
from corral.node.dispatch import reply, run_call
from corral.node.join_server import Membership, ensure_identity, join_step
from corral.paths import Paths
from corral.rpc.declare import NodeCall
from corral.rpc.transport import TransportError, WireReply, WireRequest

_JOIN_STEPS = {J.HELLO_PATH: "hello", J.FINISH_PATH: "finish"}


@dataclass
class _Crash:
    """Where a node goes down: at the ``nth`` call of ``call``, before or
    after running it (``ran``: the node did the work, its answer is lost)."""

    call: str
    nth: int
    ran: bool


@dataclass
class LocalNode:
    """One node served in-process."""

    ctx: NodeContext
    reachable: bool = True
    _crash: _Crash | None = None

    @property
    def paths(self) -> Paths:
        return self.ctx.paths

    @property
    def membership(self) -> Membership:
        assert self.ctx.membership is not None
        return self.ctx.membership

    def go_down_at(
        self, call: NodeCall[..., Any] | str, nth: int = 1, *, ran: bool = False
    ) -> None:
        """Stop answering at the ``nth`` ``call`` from now on (a node call, or a
        step of the join exchange: ``"hello"``, ``"finish"``): that call and
        all later ones fail as refused connections (with ``ran``, the node
        does that call's work before its answer is lost)."""
        name = call if isinstance(call, str) else call.name
        self._crash = _Crash(name, nth, ran)

    def crashes_at(self, call: str) -> bool | None:
        """Whether the node goes down at this call (None: it does not; True:
        after running it; False: before)."""
        crash = self._crash
        if crash is None or crash.call != call:
            return None
        crash.nth -= 1
        if crash.nth > 0:
            return None
        self._crash = None
        return crash.ran


class LocalTransport:
    """Serves calls to the nodes added to it, by address."""

    def __init__(self) -> None:
        self.nodes: dict[str, LocalNode] = {}

    def add(self, paths: Paths, address: str) -> LocalNode:
        """Serve the node whose root is ``paths`` at ``address``."""
        membership = Membership(paths)
        membership.ssl_context()  # as noded's start: a joining node makes its identity
        ctx = NodeContext(paths, address, port=0, membership=membership)
        node = self.nodes[address] = LocalNode(ctx)
        return node

    def _node(self, address: str) -> LocalNode:
        node = self.nodes.get(address)
        if node is None or not node.reachable:
            raise _refused(address)
        return node

    async def send(self, request: WireRequest) -> WireReply:
        """Run the call on its node; TimeoutError once its timeout expires."""
        node = self._node(request.address)
        if not node.membership.joined:
            return reply(False, J.NOT_IN_CLUSTER, status=403)
        crash = node.crashes_at(request.call)
        if crash is not None:
            if crash:
                async with asyncio.timeout(request.timeout):
                    await run_call(
                        node.ctx, request.call, request.body, request.fence, request.fence_until
                    )
            node.reachable = False
            raise _refused(request.address)
        async with asyncio.timeout(request.timeout):
            return await run_call(
                node.ctx, request.call, request.body, request.fence, request.fence_until
            )

    def join_channel(self, address: str) -> LocalJoinChannel:
        """The join exchange with the node at ``address``."""
        return LocalJoinChannel(self, address)

    async def close(self) -> None:
        """Nothing to release: there are no connections."""


def _refused(address: str) -> TransportError:
    return TransportError(
        f"Cannot connect to {address}: Connection refused", offline=True, reached=False
    )


def _connection_refused() -> ConnectionRefusedError:
    return ConnectionRefusedError(errno.ECONNREFUSED, os.strerror(errno.ECONNREFUSED))


class LocalJoinChannel:
    """The join exchange with an in-process node: its own join steps, and the
    certificate its TLS listener would present."""

    def __init__(self, transport: LocalTransport, address: str) -> None:
        self._transport = transport
        self._address = address
        self.where = address
        self.peer_cert: bytes | None = None

    def _node(self) -> LocalNode:
        node = self._transport.nodes.get(self._address)
        if node is None or not node.reachable:
            raise _connection_refused()
        return node

    async def connect(self) -> None:
        node = self._node()
        if node.membership.joined:
            pem = node.paths.server_pem.read_bytes()
        else:
            pem = await asyncio.to_thread(ensure_identity, node.paths)
        self.peer_cert = J.pem_to_der(pem)

    async def post(self, path: str, body: bytes) -> bytes:
        node, step = self._node(), _JOIN_STEPS[path]
        crash = node.crashes_at(step)
        if crash is not None:
            if crash:
                await join_step(node.membership, step, body)
            node.reachable = False
            raise _connection_refused()
        answer = await join_step(node.membership, step, body)
        return answer.body

    async def close(self) -> None:
        """Nothing to close."""
