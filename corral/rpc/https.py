"""The production transport of node calls: HTTPS with mutual TLS (aiohttp).

``POST https://<node>:<port>/<call>``.  One aiohttp session holds the
connections to every node, so they are kept alive and reused across calls.
"""

from __future__ import annotations

import math
from pathlib import Path

import aiohttp

from corral.crypto.tls import ssl_client_context
from corral.paths import Paths
from corral.rpc.client import RpcClient
from corral.rpc.fencing import FENCE_HEADER, UNTIL_HEADER, header_value, until_value
from corral.rpc.join_channel import TlsJoinChannel
from corral.rpc.transport import TransportError, WireReply, WireRequest, failure_reason
from corral.rpc.versions import headers as version_headers
from corral.rpc.versions import of_headers

# Enough for the concurrent jobs of a busy master that all call the same node.
CONNECTIONS_PER_NODE = 32
_HEADERS = {"Content-Type": "application/json"}


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def _reason(err: BaseException) -> str:
    """Why a connection failed, in a few words."""
    # aiohttp wraps the underlying OSError or SSLError.
    inner = getattr(err, "certificate_error", None) or getattr(err, "os_error", None) or err
    return failure_reason(inner)


class HttpsTransport:
    """Calls nodes' noded on ``port`` with the cluster's client certificate
    (``certfile`` overrides the one presented, default ``client.pem``)."""

    def __init__(self, paths: Paths, port: int, *, certfile: Path | None = None) -> None:
        self._paths = paths
        self.port = port
        self._certfile = certfile
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        # Created on first use: a session must be made inside the running loop.
        if self._session is None or self._session.closed:
            ctx = ssl_client_context(self._paths, self._certfile)
            connector = aiohttp.TCPConnector(ssl=ctx, limit=0, limit_per_host=CONNECTIONS_PER_NODE)
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    async def close(self) -> None:
        """Close the connections to all nodes."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    def join_channel(self, address: str) -> TlsJoinChannel:
        """A TLS connection to the node waiting to join at ``address``."""
        return TlsJoinChannel(self._paths, address, self.port)

    async def send(self, request: WireRequest) -> WireReply:
        """POST the call; TransportError when the node gave no HTTP answer."""
        where = f"{request.address}:{self.port}"
        try:
            return await self._post(request)
        except aiohttp.ClientSSLError as err:
            raise TransportError(
                f"TLS error with {where}: {_reason(err)}", offline=False, reached=None
            ) from None
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as err:
            raise TransportError(
                f"Cannot connect to {where}: {_reason(err)}", offline=True, reached=False
            ) from None
        except TimeoutError:
            raise
        except aiohttp.ClientError as err:
            raise TransportError(
                f"Error talking to {where}: {_reason(err)}", offline=False, reached=None
            ) from None

    async def _post(self, request: WireRequest) -> WireReply:
        url = f"https://{_host(request.address)}:{self.port}/{request.call}"
        # No rounding up of timeouts to whole seconds (aiohttp's default above
        # 5 s): a query's deadline is meant to the millisecond.  The connect
        # timeout covers the TLS handshake too.
        timeout = aiohttp.ClientTimeout(
            total=request.timeout,
            sock_connect=min(request.connect_timeout, request.timeout),
            ceil_threshold=math.inf,
        )
        # The version as it stands at the call (tests run a master of another).
        headers = {**_HEADERS, **version_headers()}
        if request.fence is not None:
            headers[FENCE_HEADER] = header_value(request.fence)
            if request.fence_until is not None:
                headers[UNTIL_HEADER] = until_value(request.fence_until)
        session = self._get_session()
        async with session.post(url, data=request.body, headers=headers, timeout=timeout) as resp:
            return WireReply(resp.status, await resp.read(), of_headers(resp.headers.get))


def https_client(
    paths: Paths, port: int, *, certfile: Path | None = None, **options: float
) -> RpcClient:
    """An RPC client over :class:`HttpsTransport` (``options``: RpcClient's)."""
    return RpcClient(HttpsTransport(paths, port, certfile=certfile), **options)
