"""A typed client of Ganeti's Remote API v2 (corral-rapi or Ganeti's own).

Blocking use (standard library only, quick to import: command-line tools)::

    with RapiClient("192.0.2.1", username="alice", password="pw", ca_file="rapi.pem") as c:
        job_id = c.startup_instance("inst1.example.com")
        status = c.wait_for_job(job_id)

asyncio use (aiohttp, imported at the first request), the same calls as coroutines::

    async with AsyncRapiClient("192.0.2.1", ca_file="rapi.pem") as c:
        names = await c.get_instances()

Both keep their connections alive between requests. Calls that submit a job
return its id as an int (the wire has a JSON string); errors of the server
raise :class:`RapiError` (``code``: the HTTP status), unreachable servers
:class:`RapiConnectionError`, a certificate that does not verify against
``ca_file`` :class:`CertificateError`. The calls themselves are declared once,
in client_calls and client_instances.
"""

from __future__ import annotations

import http.client
import ssl

from corral.rapi import client_core as core
from corral.rapi.client_calls import ClusterCalls
from corral.rapi.client_core import (
    DEFAULT_PORT,
    JOB_STATUS_FINALIZED,
    JOB_STATUS_SUCCESS,
    CertificateError,
    RapiConnectionError,
    RapiError,
    Request,
)
from corral.rapi.client_instances import InstanceCalls

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

    import aiohttp

    from corral.rapi.client_core import Steps

__all__ = [
    "DEFAULT_PORT",
    "JOB_STATUS_FINALIZED",
    "JOB_STATUS_SUCCESS",
    "AsyncRapiClient",
    "CertificateError",
    "RapiClient",
    "RapiConnectionError",
    "RapiError",
    "Request",
]

#: A reused keep-alive connection that fails like this was closed by the
#: server while idle, before it read the request: one retry on a new one.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


def tls_context(ca_file: str | None, verify_hostname: bool) -> ssl.SSLContext:
    """A client context that verifies the server's certificate against
    ``ca_file`` (None: the system's CAs); host names only if asked, as
    Ganeti's client, since clusters are often called by address."""
    ctx = ssl.create_default_context(cafile=ca_file)
    ctx.check_hostname = verify_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED  # check_hostname=False must not weaken this
    return ctx


class _Transport(ClusterCalls, InstanceCalls):
    """The connection settings both transports take; ``timeout`` in seconds,
    ``scheme="http"`` for a server run with ``--no-ssl``."""

    def __init__(
        self,
        host: str,
        port: int = DEFAULT_PORT,
        username: str | None = None,
        password: str | None = None,
        ca_file: str | None = None,
        verify_hostname: bool = False,
        timeout: float | None = 60.0,
        scheme: str = "https",
    ) -> None:
        core.check_credentials(username, password)
        self.host = host
        self.port = port
        self.base_url = core.base_url(scheme, host, port)
        self._https = scheme == "https"
        self._ca_file = ca_file
        self._verify_hostname = verify_hostname
        self._timeout = timeout
        self._headers = core.headers(username, password)

    def _tls_context(self) -> ssl.SSLContext | None:
        return tls_context(self._ca_file, self._verify_hostname) if self._https else None


class RapiClient(_Transport):
    """The blocking client: one keep-alive connection, not for use by several
    threads at once. ``timeout`` bounds each socket operation (a job wait's
    long poll takes up to ~10 s); ``scheme="http"`` for a ``--no-ssl`` server."""

    _conn: http.client.HTTPConnection | None = None
    _tls: ssl.SSLContext | None = None

    def close(self) -> None:
        """Close the connection (the next request opens a new one)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> RapiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            if self._https:
                if self._tls is None:
                    self._tls = self._tls_context()
                self._conn = http.client.HTTPSConnection(
                    self.host, self.port, timeout=self._timeout, context=self._tls
                )
            else:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self._timeout)
        return self._conn

    def send(self, request: Request[Any]) -> Any:
        """Send one request; its decoded answer."""
        for attempt in (1, 2):
            reused = self._conn is not None
            try:
                status, data = self._exchange(request)
            except _STALE as err:
                self.close()
                if reused and attempt == 1:
                    continue
                raise RapiConnectionError(f"{self.base_url}: {err}") from None
            except ssl.SSLCertVerificationError as err:
                self.close()
                raise CertificateError(f"{self.base_url}: {err}") from None
            except (OSError, http.client.HTTPException) as err:
                self.close()
                raise RapiConnectionError(f"{self.base_url}: {err}") from None
            return request.answer(status, data)
        raise AssertionError("unreachable")

    def _exchange(self, request: Request[Any]) -> tuple[int, bytes]:
        conn = self._connection()
        conn.request(request.method, request.target(), request.content(), self._headers)
        response = conn.getresponse()
        data = response.read()
        if response.will_close:
            self.close()
        return response.status, data

    def _run(self, call: Request[Any] | Steps[Any]) -> Any:
        if isinstance(call, Request):
            return self.send(call)
        try:
            request = next(call)
            while True:
                request = call.send(self.send(request))
        except StopIteration as stop:
            return stop.value


class AsyncRapiClient(core.AsyncTransport, _Transport):
    """The asyncio client (aiohttp): the calls of :class:`RapiClient` as
    coroutines, over a pool of keep-alive connections; safe for concurrent
    calls. ``timeout`` bounds each request. Close it (``async with`` or
    :meth:`close`) in the event loop that used it."""

    _session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        """Close the connections."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> AsyncRapiClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _open_session(self) -> aiohttp.ClientSession:
        import aiohttp  # here, so that the blocking client's users never load it

        tls = self._tls_context()
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=tls if tls is not None else False),
            timeout=aiohttp.ClientTimeout(total=self._timeout),
            headers=self._headers,
        )

    async def send(self, request: Request[Any]) -> Any:
        """Send one request; its decoded answer."""
        import aiohttp
        from yarl import URL

        if self._session is None:
            self._session = self._open_session()
        # encoded already: yarl must not decode a name's %2F into a path separator
        url = URL(self.base_url + request.target(), encoded=True)
        body = request.content()
        try:
            async with self._session.request(
                request.method, url, data=body, allow_redirects=False
            ) as resp:
                status, data = resp.status, await resp.read()
        except aiohttp.ClientConnectorCertificateError as err:
            raise CertificateError(f"{self.base_url}: {err.certificate_error}") from None
        except (aiohttp.ClientError, TimeoutError) as err:
            raise RapiConnectionError(f"{self.base_url}: {err!r}") from None
        return request.answer(status, data)

    async def _run(self, call: Request[Any] | Steps[Any]) -> Any:
        if isinstance(call, Request):
            return await self.send(call)
        try:
            request = next(call)
            while True:
                request = call.send(await self.send(request))
        except StopIteration as stop:
            return stop.value
