"""Asyncio client of the node RPC: calls one or many nodes in parallel.

One :class:`RpcClient` holds one aiohttp session, so connections to nodes are
kept alive and reused across calls.  A call never raises because of a node: every
node's outcome is an :class:`RpcResult`, and the caller decides what a failure
means (``raise_if_failed``).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import math
import os
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from corral import errors
from corral.crypto.tls import ssl_client_context
from corral.paths import Paths
from corral.rpc.calls import get_call
from corral.rpc.reachability import (
    DEFAULT_MEMORY,
    DEFAULT_QUERY_DEADLINE,
    Reachability,
    current_deadline,
)

log = logging.getLogger(__name__)

# A node that does not accept a connection and finish the TLS handshake within
# this time counts as offline, whatever the call's own (maybe longer) timeout is
# (aiohttp's sock_connect covers both).  The call's timeout bounds everything,
# waiting for a free connection to the node included: calls to many nodes run in
# parallel, so a silent node costs a call no more than that.
CONNECT_TIMEOUT = 10.0
# The connect timeout for a node remembered as unreachable (see reachability):
# a logical unit still tries it, but does not wait long for what failed lately.
REMEMBERED_CONNECT_TIMEOUT = 2.0
# Enough for the concurrent jobs of a busy master that all call the same node.
CONNECTIONS_PER_NODE = 32


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


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def _reason(err: BaseException) -> str:
    """Why a connection failed, in a few words."""
    # aiohttp wraps the underlying OSError or SSLError.
    inner = getattr(err, "certificate_error", None) or getattr(err, "os_error", None) or err
    if isinstance(inner, ssl.SSLCertVerificationError):
        return f"certificate verify failed: {inner.verify_message}"
    if isinstance(inner, ssl.SSLError):
        return str(inner.reason or inner)
    errno = getattr(inner, "errno", None)
    if errno:
        return os.strerror(errno)
    return str(err) or err.__class__.__name__


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
    """Calls nodes' noded over HTTPS with the cluster's client certificate.

    ``certfile`` overrides the certificate presented (default ``client.pem``).
    Calls made under :func:`corral.rpc.reachability.query_deadline` answer by
    that deadline and skip nodes remembered as unreachable (``reachability``,
    which remembers failures for ``unreachable_memory`` seconds);
    ``query_deadline`` is the deadline queries take.
    """

    def __init__(
        self,
        paths: Paths,
        port: int,
        *,
        certfile: Path | None = None,
        query_deadline: float = DEFAULT_QUERY_DEADLINE,
        unreachable_memory: float = DEFAULT_MEMORY,
    ) -> None:
        self._paths = paths
        self._port = port
        self._certfile = certfile
        self._session: aiohttp.ClientSession | None = None
        self.query_deadline = query_deadline
        self.reachability = Reachability(unreachable_memory)
        # address → the background call that checks whether a remembered node is back
        self._probes: dict[str, asyncio.Task[RpcResult]] = {}

    def _get_session(self) -> aiohttp.ClientSession:
        # Created on first use: a session must be made inside the running loop.
        if self._session is None or self._session.closed:
            ctx = ssl_client_context(self._paths, self._certfile)
            connector = aiohttp.TCPConnector(ssl=ctx, limit=0, limit_per_host=CONNECTIONS_PER_NODE)
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    async def close(self) -> None:
        """Close the connections to all nodes."""
        for task in list(self._probes.values()):
            task.cancel()
        if self._session is not None:
            await self._session.close()
            self._session = None

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
        result, reached = await self._attempt(node, address, name, body, seconds, connect)
        if reached:
            self.reachability.answered(address)
        elif reached is not None:
            self.reachability.failed(node, address, result.fail_msg or "no answer")
        return result

    async def _attempt(
        self, node: str, address: str, name: str, body: bytes, seconds: float, connect: float
    ) -> tuple[RpcResult, bool | None]:
        """The call's result, and whether the node answered (None: cannot tell,
        e.g. a TLS error: the node is there but not one we trust)."""
        try:
            payload, fail_msg = await self._post(address, name, body, seconds, connect)
        except aiohttp.ClientSSLError as err:
            msg = f"TLS error with {address}:{self._port}: {_reason(err)}"
            return RpcResult(node, name, fail_msg=msg), None
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as err:
            msg = f"Cannot connect to {address}:{self._port}: {_reason(err)}"
            return RpcResult(node, name, fail_msg=msg, offline=True), False
        except TimeoutError:
            msg = f"RPC call {name} to {address} timed out after {round(seconds, 3):g} s"
            return RpcResult(node, name, fail_msg=msg), False
        except aiohttp.ClientError as err:
            msg = f"Error talking to {address}:{self._port}: {_reason(err)}"
            return RpcResult(node, name, fail_msg=msg), None
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

    async def _post(
        self, address: str, name: str, body: bytes, seconds: float, connect: float
    ) -> tuple[Any, str | None]:
        url = f"https://{_host(address)}:{self._port}/{name}"
        # No rounding up of timeouts to whole seconds (aiohttp's default above
        # 5 s): a query's deadline is meant to the millisecond.
        timeout = aiohttp.ClientTimeout(
            total=seconds, sock_connect=min(connect, seconds), ceil_threshold=math.inf
        )
        headers = {"Content-Type": "application/json"}
        session = self._get_session()
        async with session.post(url, data=body, headers=headers, timeout=timeout) as resp:
            data = await resp.read()
            return _parse_reply(resp.status, data)
