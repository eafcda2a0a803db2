"""Bad input to corral-rapi: each case is refused with Ganeti's status and
JSON error, the daemon keeps serving, and nothing changes (jobs, config
serial, cluster info, instances) — checked after every test."""

from __future__ import annotations

import gzip
import socket
import ssl
import threading
from collections.abc import Iterator
from http import HTTPStatus
from typing import Any

import pytest

from tests.helpers.cluster import RAPI_PORT, TestCluster, unique_loopback
from tests.helpers.instances import add, ok
from tests.helpers.jobs import cluster_state, wait_final
from tests.helpers.osdef import make_os
from tests.helpers.rapi import (
    JSON,
    READ_USER,
    WRITE_USER,
    Answer,
    Rapi,
    add_users,
    basic,
    rapi_cluster,
    raw_exchange,
    tls_socket,
)
from tests.helpers.waiting import wait_until

INSTANCE = "bad1.example.com"
BASE = f"/2/instances/{INSTANCE}"
MAX_LOGIN_DELAY = 0.2


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    """A cluster with one running instance; failed logins wait at most 0.2 s."""
    root = tmp_path_factory.mktemp("rapi-bad")
    with rapi_cluster(root, f"--max-login-delay {MAX_LOGIN_DELAY}") as cluster:
        make_os(cluster.paths, "plain", variants=None)
        add_users(cluster)
        ok(add(cluster, INSTANCE, "-t", "file", "-s", "8m", "-o", "plain"))
        yield cluster


@pytest.fixture(scope="module")
def writer(cl: TestCluster) -> Rapi:
    return Rapi(cl, *WRITE_USER)


def _state(cl: TestCluster) -> dict[str, Any]:
    with cl.client() as client:
        instances = client.call("QueryInstances", [], ["name", "status", "beparams"], False)
    return {**cluster_state(cl), "instances": instances}


# Cases that may submit a job which then fails (a name RAPI cannot refuse
# before masterd looks it up): new jobs are allowed there, if they failed.
REFUSED_JOBS_OK = {"test_names_with_path_tricks", "test_unicode_names_in_bodies"}


@pytest.fixture(autouse=True)
def unchanged(request: pytest.FixtureRequest, cl: TestCluster) -> Iterator[None]:
    """After each case: the daemon still answers, and nothing changed."""
    before = _state(cl)
    yield
    assert Rapi(cl).get("/2/info")["name"] == cl.cluster_name
    after = _state(cl)
    if request.function.__name__ in REFUSED_JOBS_OK:
        known = {job_id for job_id, _status in before["jobs"]}
        new = [job_id for job_id, _status in after["jobs"] if job_id not in known]
        if new:
            with cl.client() as client:
                assert all(row[0] == "error" for row in wait_final(client, new)), new
        after["jobs"] = [row for row in after["jobs"] if row[0] in known]
    assert after == before


def refused(answer: Answer, status: int, *texts: str) -> str:
    """``answer`` is Ganeti's JSON error ``status``; its message (unescaped)."""
    assert answer.status == status, (answer.status, answer.body)
    assert answer.content_type == JSON
    body = answer.json
    assert set(body) == {"code", "message", "explain"}
    assert body["code"] == status and body["explain"] == HTTPStatus(status).description
    message = str(body["message"]).replace("&#x27;", "'").replace("&quot;", '"')
    for text in texts:
        assert text in message, (text, message)
    return message


# --- bodies -------------------------------------------------------------------

MALFORMED = [b"{", b'{"beparams": {"maxmem": 1}', b"[1, 2,", b"\xff\xfe{}", b"{'a': 1}", b"nul"]


@pytest.mark.parametrize("body", MALFORMED, ids=lambda b: repr(b)[2:-1])
def test_malformed_json(writer: Rapi, body: bytes) -> None:
    refused(writer.request("PUT", f"{BASE}/modify", raw=body), 400, "Unable to parse JSON data")


def test_malformed_json_on_create(writer: Rapi) -> None:
    refused(writer.request("POST", "/2/instances", raw=b'{"__version__": 1,'), 400)


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/jsonx", None]
)
def test_wrong_content_type(writer: Rapi, content_type: str | None) -> None:
    # No Content-Type at all counts as application/octet-stream (RFC 2616 7.2.1).
    body = b'{"beparams": {"maxmem": 64}}'
    answer = writer.request("PUT", f"{BASE}/modify", raw=body, content_type=content_type)
    refused(answer, 415)


def test_content_type_with_parameters_is_json(writer: Rapi) -> None:
    """``application/json; charset=utf-8`` is JSON (a refusal of the body's
    *content* proves it was parsed)."""
    answer = writer.request(
        "PUT",
        f"{BASE}/modify",
        {"no_such_field": 1},
        content_type="application/json; charset=utf-8",
    )
    refused(answer, 400, "no_such_field")


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("PUT", f"{BASE}/modify", {"no_such_field": 1}, "no_such_field"),
        ("PUT", f"{BASE}/rename", {"new_name": "x.example.com", "colour": "red"}, "colour"),
        ("POST", "/2/instances", {"__version__": 1, "bogus": True}, "bogus"),
        ("POST", f"{BASE}/disk/0/grow", {"amount": 1, "fast": True}, "fast"),
    ],
)
def test_unknown_fields(writer: Rapi, method: str, path: str, body: Any, field: str) -> None:
    refused(writer.request(method, path, body), 400, f"'{field}'")


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("PUT", f"{BASE}/modify", {"beparams": "maxmem=64"}, "beparams"),
        ("PUT", f"{BASE}/rename", {"new_name": 42}, "new_name"),
        ("POST", f"{BASE}/disk/0/grow", {"amount": "lots"}, "amount"),
        ("POST", "/2/instances", {"__version__": 1, "name": ["a"], "disks": "x"}, "disks"),
        ("PUT", f"{BASE}/shutdown", {"timeout": "soon"}, "timeout"),
        ("POST", f"{BASE}/reinstall", {"start": "yes"}, "start"),
    ],
)
def test_wrongly_typed_fields(writer: Rapi, method: str, path: str, body: Any, field: str) -> None:
    refused(writer.request(method, path, body), 400, field)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", f"{BASE}/modify", [1, 2]),
        ("PUT", f"{BASE}/modify", "text"),
        ("POST", "/2/instances", None),
        ("POST", "/2/instances", {"__version__": 0}),
        ("POST", "/2/instances", {"__version__": 7}),
    ],
)
def test_wrong_body_kinds(writer: Rapi, method: str, path: str, body: Any) -> None:
    refused(writer.request(method, path, body), 400)


@pytest.mark.parametrize("path", ["/2/instances?bulk=yes", f"{BASE}/startup?force=maybe"])
def test_wrongly_typed_query_arguments(writer: Rapi, path: str) -> None:
    method = "GET" if path.startswith("/2/instances?") else "PUT"
    refused(writer.request(method, path), 400, "Invalid value")


def test_static_parameters_cannot_be_overridden(writer: Rapi) -> None:
    body = {"instance_name": "other.example.com", "beparams": {"maxmem": 64}}
    refused(writer.request("PUT", f"{BASE}/modify", body), 400, "instance_name")


def test_body_over_the_limit(writer: Rapi) -> None:
    big = b'{"beparams": {"maxmem": 64}, "pad": "' + b"x" * (1 << 20) + b'"}'
    refused(writer.request("PUT", f"{BASE}/modify", raw=big), 413)


def test_chunked_body_over_the_limit(cl: TestCluster) -> None:
    """Without a Content-Length the limit holds as the chunks arrive."""
    chunk = b"x" * 65536
    head = (
        f"PUT {BASE}/modify HTTP/1.1\r\nHost: {cl.node_ip}\r\n"
        f"Authorization: {basic(*WRITE_USER)}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    ).encode()
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(20)) + b"0\r\n\r\n"
    status = raw_exchange(cl, head + body)
    assert status == 413


@pytest.mark.parametrize(
    "body", [gzip.compress(b'{"beparams": {"maxmem": 64}}', mtime=0), b"\x1f\x8b\x08\x00broken"]
)
def test_compressed_bodies_are_not_json(writer: Rapi, body: bytes) -> None:
    """Issue 20: a bad gzip body answered 500.  As Ganeti's RAPI, a body is
    taken as it comes (no Content-Encoding is undone): compressed, it is no JSON."""
    answer = writer.request("PUT", f"{BASE}/modify", raw=body, headers={"Content-Encoding": "gzip"})
    refused(answer, 400, "Unable to parse JSON data")


# --- credentials and access ------------------------------------------------


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        basic("writer", "wrong"),
        basic("nobody", "wpw"),
        basic("writer", ""),
        "Basic !!!not-base64!!!",
        "Basic " + "d3JpdGVyd3B3",  # "writerwpw": no colon
        "Bearer abc",
    ],
    ids=[
        "none",
        "wrong-password",
        "unknown-user",
        "empty-password",
        "bad-base64",
        "no-colon",
        "bearer",
    ],
)
def test_missing_or_wrong_credentials(cl: TestCluster, authorization: str | None) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    # From an address of its own: its failures slow down no other test.
    client = Rapi(cl, source=unique_loopback())
    for method, path in (("PUT", f"{BASE}/shutdown"), ("DELETE", BASE), ("PUT", "/2/tags?tag=x")):
        answer = client.request(method, path, headers=headers)
        refused(answer, 401)
        assert answer.headers["www-authenticate"] == 'Basic realm="Ganeti Remote API"'


def test_basic_without_credentials_is_a_bad_request(cl: TestCluster) -> None:
    answer = Rapi(cl).request("PUT", "/2/tags?tag=x", headers={"Authorization": "Basic"})
    refused(answer, 400, "Basic authentication requires credentials")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", f"{BASE}/shutdown", None),
        ("POST", f"{BASE}/reboot", None),
        ("DELETE", BASE, None),
        ("PUT", f"{BASE}/modify", {"beparams": {"maxmem": 64}}),
        ("POST", f"{BASE}/reinstall", None),
        ("PUT", "/2/tags?tag=x", None),
        ("PUT", "/2/modify", {}),
        ("POST", "/2/filters", {"action": "REJECT"}),
        ("GET", "/2/jobs/1/wait", {"fields": ["status"]}),
    ],
)
def test_read_only_user_writing(cl: TestCluster, method: str, path: str, body: Any) -> None:
    refused(Rapi(cl, *READ_USER).request(method, path, body), 403)


# --- unknown resources and methods --------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/2/nosuch",
        "/3/info",
        "/2/info/",
        "//2/info",
        "/2/instances/",
        f"{BASE}/nosuch",
        f"{BASE}/disk/x/grow",
        f"{BASE}/disk/0/shrink",
        "/2/jobs/abc",
        "/2/query",
        "/ui.",
        "/2/openapi.yaml",
    ],
)
def test_unknown_resources(writer: Rapi, path: str) -> None:
    refused(writer.request("GET", path), 404)


@pytest.mark.parametrize("method", ["HEAD", "PATCH", "OPTIONS", "TRACE", "PROPFIND"])
@pytest.mark.parametrize("path", ["/2/info", BASE, "/2/nosuch"])
def test_unknown_methods(writer: Rapi, method: str, path: str) -> None:
    answer = writer.request(method, path)
    if path == "/2/nosuch":
        assert answer.status == 404
    else:
        # As Ganeti: a method the resource lacks is "501 Not Implemented".
        assert answer.status == 501, answer.body
    if method != "HEAD":  # HEAD's answer has no body
        refused(answer, answer.status)


def test_unregistered_method_token(writer: Rapi) -> None:
    """A method token HTTP does not define is a method the resource lacks,
    as in Ganeti."""
    refused(writer.request("FROB", "/2/info"), 501, "Method FROB is unsupported")


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/2/info"), ("DELETE", "/2/nodes"), ("PUT", BASE), ("POST", f"{BASE}/startup")],
)
def test_methods_the_resource_lacks(writer: Rapi, method: str, path: str) -> None:
    refused(writer.request(method, path, {}), 501, f"Method {method} is unsupported")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/2/query/nosuch?fields=name", None),
        ("PUT", "/2/query/nosuch", {"fields": ["name"]}),
        ("GET", "/2/query/nosuch/fields", None),
    ],
)
def test_unknown_query_resource(writer: Rapi, method: str, path: str, body: Any) -> None:
    """Issue 20: 500.  Ganeti's luxid cannot parse the resource's name, and its
    RAPI answers that luxi error 502."""
    refused(writer.request(method, path, body), 502, "Failed to parse request", "'nosuch'")


def test_unknown_query_resource_without_fields(writer: Rapi) -> None:
    """The missing argument is found first, as in Ganeti."""
    refused(writer.request("GET", "/2/query/nosuch"), 400, "Missing 'fields' query argument")


# --- writes caused by pages of other sites ------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "https://evil.example.com"},
        {"Origin": "null"},
        {"Origin": "http://{node}:5080"},  # another scheme is another origin
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site", "Origin": "https://{node}:5080"},
    ],
    ids=["foreign-origin", "null-origin", "http-origin", "cross-site", "same-site"],
)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", f"{BASE}/reboot"),
        ("PUT", f"{BASE}/shutdown"),
        ("DELETE", BASE),
        ("POST", "/2/nosuch"),
    ],
)
def test_writes_from_another_site_are_refused(
    cl: TestCluster, writer: Rapi, headers: dict[str, str], method: str, path: str
) -> None:
    """Issue 20: a page of another site, with the browser's cached credentials,
    rebooted an instance.  Browsers say where a request comes from; the other
    clients say nothing (and are served: every other test)."""
    sent = {name: value.format(node=cl.node_ip) for name, value in headers.items()}
    answer = writer.request(method, path, headers=sent, content_type="text/plain", raw=b"")
    refused(answer, 403, f"Refused a {method} caused by a page of another site")


# --- names with path tricks ---------------------------------------------------

TRICKS = [
    "/2/instances/..",
    "/2/instances/.",
    "/2/instances/%2e%2e",
    "/2/instances/%2E%2E/info",
    f"/2/instances/..%2F{INSTANCE}",
    f"/2/instances/{INSTANCE}%2Ftags",
    f"/2/instances/{INSTANCE}%2ftags",
    f"/2/instances/{INSTANCE}%00",
    f"/2/instances/{INSTANCE[:-1]}%2{INSTANCE[-1]}",
    "/2/instances/%C3%A9t%C3%A9.example.com",
    "/2/nodes/..%2F..%2Finstances",
    "/2/nodes/%2e%2e%2f%2e%2e%2finfo",
    "/2/groups/default%2F..%2F..%2Finfo",
    f"/2/instances/{INSTANCE}/../../info",
    "/2/instances/" + "a" * 4000,
    "/2/instances/" + "a" * 20000,
    "/2/jobs/1%2F..%2F..%2Finfo",
]


@pytest.mark.parametrize("path", TRICKS, ids=lambda p: p[:60])
def test_names_with_path_tricks(writer: Rapi, path: str) -> None:
    """Never another object: 404 (or 400 for what HTTP cannot carry)."""
    answer = writer.request("GET", path)
    assert answer.status in (400, 404), (answer.status, answer.body[:200])
    assert INSTANCE.encode() not in answer.body
    # A name the path pattern takes (as Ganeti's: "..", "."): the job is
    # submitted for that literal name, and fails (the fixture checks that).
    answer = writer.request("DELETE", path)
    assert answer.status in (200, 400, 404, 501), answer.body[:200]
    if answer.status == 200:
        with writer.cl.client() as client:
            (ops,) = client.query_jobs([int(answer.json)], ["ops"])[0]
        assert ops[0]["instance_name"] == path.rsplit("/", 1)[1]
    assert writer.request("PUT", path).status in (400, 404, 501)


@pytest.mark.parametrize("suffix", ["", "/wait"])
def test_huge_job_id(writer: Rapi, suffix: str) -> None:
    answer = writer.request("GET", "/2/jobs/" + "9" * 30 + suffix, {"fields": ["status"]})
    refused(answer, 404)


@pytest.mark.parametrize(
    "raw_path",
    [
        f"/2/instances/{INSTANCE}\x00/tags".encode(),
        "/2/instances/été.example.com".encode(),
        b"/2/instances/\xff\xfe",
        f"/2/instances/{INSTANCE} /tags".encode(),
    ],
    ids=["nul", "utf8", "invalid-utf8", "space"],
)
def test_raw_bytes_in_names(cl: TestCluster, raw_path: bytes) -> None:
    request = b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % raw_path
    assert raw_exchange(cl, request) in (400, 404)


def test_unicode_names_in_bodies(writer: Rapi) -> None:
    body = {"new_name": "été\u202e.example.com", "name_check": False, "ip_check": False}
    answer = writer.request("PUT", f"{BASE}/rename?dry-run=1", body)
    # Either refused at once, or a dry-run job (which changes nothing).
    if answer.status == 200:
        with writer.cl.client() as client:
            (row,) = wait_final(client, [int(answer.json)])
        assert row[0] == "error"
    else:
        refused(answer, 400)


# --- connections that hold the server -----------------------------------------


class _SlowLoris(threading.Thread):
    """Sends a request's headers one byte at a time and never finishes them."""

    def __init__(self, cl: TestCluster, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.cl, self.stop = cl, stop
        self.sent = 0

    def run(self) -> None:
        header = f"GET /2/info HTTP/1.1\r\nHost: {self.cl.node_ip}\r\nX-Slow: ".encode()
        try:
            with tls_socket(self.cl) as sock:
                data = header + b"a" * 100000
                while not self.stop.is_set() and self.sent < len(data):
                    sock.sendall(data[self.sent : self.sent + 1])
                    self.sent += 1
                    self.stop.wait(0.05)  # pacing of the client, not a synchronisation
        except OSError:
            pass  # the server may close it; the test is what the others get


def _normal_requests(cl: TestCluster, writer: Rapi) -> None:
    for _ in range(5):
        assert Rapi(cl).get("/2/info")["name"] == cl.cluster_name
        assert writer.get(BASE)["name"] == INSTANCE
        assert Rapi(cl, *READ_USER).get("/2/query/instance?fields=name")["data"]


def test_slow_loris_and_idle_connections_while_others_are_served(
    cl: TestCluster, writer: Rapi
) -> None:
    stop = threading.Event()
    loris = [_SlowLoris(cl, stop) for _ in range(10)]
    idle: list[ssl.SSLSocket] = []
    silent: list[socket.socket] = []
    try:
        for thread in loris:
            thread.start()
        for _ in range(200):
            idle.append(tls_socket(cl))  # TLS established, nothing sent
        for _ in range(150):
            # Not even a TLS handshake: more than the 128 the daemon lets wait.
            silent.append(socket.create_connection((cl.node_ip, RAPI_PORT), timeout=10))
        # Every slow client has started its headers before the others come.
        wait_until(lambda: all(thread.sent > 5 for thread in loris), 30, "slow clients sending")
        _normal_requests(cl, writer)
        # The held connections are still open (not refused to make room).
        assert sum(_still_open(sock) for sock in idle) == len(idle)
    finally:
        stop.set()
        for sock in [*idle, *silent]:
            sock.close()
        for thread in loris:
            thread.join(10)
    _normal_requests(cl, writer)


def _still_open(sock: ssl.SSLSocket) -> bool:
    """Whether the server has not closed ``sock`` (nothing to read, no EOF)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except ssl.SSLWantReadError:
        return True
    except OSError:
        return False
    finally:
        sock.setblocking(True)
