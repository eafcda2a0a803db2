"""Raw HTTPS requests to a test cluster's corral-rapi (stdlib only).

Tests of the HTTP level need exact control of paths, headers and bodies, so
this is deliberately not the project's RAPI client.  Typical use::

    rapi = Rapi(cl, "admin", "pw")
    answer = rapi.request("GET", "/2/info")
    assert answer.status == 200 and answer.json["name"] == cl.cluster_name
    job_id = rapi.request("PUT", "/2/tags?tag=a").json    # a bare JSON number
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.helpers.cluster import RAPI_PORT, TestCluster, new_root

JSON = "application/json"
WRITE_USER = ("writer", "wpw")
READ_USER = ("reader", "rpw")


@dataclass
class Answer:
    """One HTTP answer: status, headers (names lower-cased) and body."""

    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")


def basic(user: str, password: str) -> str:
    """An ``Authorization`` header value for HTTP Basic."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return f"Basic {token}"


def tls_context(cl: TestCluster) -> ssl.SSLContext:
    """A client context trusting only the cluster's rapi.pem."""
    return ssl.create_default_context(cafile=str(cl.rapi_ca))


def add_users(cl: TestCluster) -> None:
    """The users the HTTP tests log in as: a writer and a reader."""
    cl.add_rapi_user(*WRITE_USER, "write")
    cl.add_rapi_user(*READ_USER, "read")


@contextmanager
def rapi_cluster(tmp_path: Path, rapi_args: str) -> Iterator[TestCluster]:
    """A running cluster whose corral-rapi gets the options ``rapi_args``
    (through etc/default/ganeti, read by ``gnt-cluster init``)."""
    cl = new_root(tmp_path)
    cl.paths.daemon_defaults.parent.mkdir(parents=True, exist_ok=True)
    cl.paths.daemon_defaults.write_text(f'RAPI_ARGS="{rapi_args}"\n')
    try:
        result = cl.init()
        assert result.rc == 0, result.stderr
        yield cl
    finally:
        cl.stop()


class Rapi:
    """Requests to ``cl``'s RAPI as ``user`` (None: no credentials), each on a
    fresh connection, optionally from the local address ``source``."""

    def __init__(
        self,
        cl: TestCluster,
        user: str | None = None,
        password: str = "",
        *,
        source: str | None = None,
        timeout: float = 60,
    ) -> None:
        self.cl = cl
        self.auth = None if user is None else basic(user, password)
        self.source = source
        self.timeout = timeout
        self.context = tls_context(cl)

    def connection(self) -> http.client.HTTPSConnection:
        source = (self.source, 0) if self.source else None
        return http.client.HTTPSConnection(
            self.cl.node_ip,
            RAPI_PORT,
            context=self.context,
            timeout=self.timeout,
            source_address=source,
        )

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        content_type: str | None = JSON,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        """Send ``method path`` (the path as is: no quoting) with ``body`` as
        JSON or the bytes ``raw``; the answer, whatever its status."""
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        sent = dict(headers or {})
        if self.auth and "Authorization" not in sent:
            sent["Authorization"] = self.auth
        if data is not None and content_type is not None:
            sent.setdefault("Content-Type", content_type)
        conn = self.connection()
        try:
            conn.request(method, path, body=data, headers=sent)
            response = conn.getresponse()
            payload = response.read()
            return Answer(
                response.status, {k.lower(): v for k, v in response.getheaders()}, payload
            )
        finally:
            conn.close()

    def get(self, path: str) -> Any:
        """GET ``path``, which must succeed; its JSON."""
        answer = self.request("GET", path)
        assert answer.status == 200, (path, answer.status, answer.body)
        return answer.json

    def job(self, method: str, path: str, body: Any = None) -> int:
        """A request that must submit a job; its id (a bare JSON number, as Ganeti 3's)."""
        answer = self.request(method, path, body)
        assert answer.status == 200, (method, path, answer.status, answer.body)
        assert answer.content_type == JSON
        assert isinstance(answer.json, int) and not isinstance(answer.json, bool), answer.json
        return answer.json


def tls_socket(cl: TestCluster, source: str | None = None, timeout: float = 30) -> ssl.SSLSocket:
    """A TLS connection to the RAPI with nothing sent yet."""
    raw = socket.create_connection(
        (cl.node_ip, RAPI_PORT), timeout=timeout, source_address=(source, 0) if source else None
    )
    return tls_context(cl).wrap_socket(raw, server_hostname=cl.node_ip)


def raw_exchange(cl: TestCluster, request: bytes) -> int:
    """Send ``request`` bytes as they are; the answer's status code."""
    with tls_socket(cl) as sock:
        sock.sendall(request)
        received = b""
        while b"\r\n" not in received:
            chunk = sock.recv(4096)
            if not chunk:
                break
            received += chunk
    return int(received.split(b" ", 2)[1])
