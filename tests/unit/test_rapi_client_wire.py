"""What Corral's RAPI client puts on the wire and how it reads the answers,
for both transports, against a real (scripted, plain HTTP) server on loopback."""

from __future__ import annotations

import inspect
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from corral.rapi.client import AsyncRapiClient, RapiClient, RapiError


class Recorder(ThreadingHTTPServer):
    """Answers each request with the next scripted (status, body) and records it."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.answers: list[tuple[int, bytes]] = []
        self.seen: list[dict[str, Any]] = []
        self.connections = 0
        self.close_silently = False  # drop keep-alive connections without saying so

    def script(self, *answers: tuple[int, Any]) -> None:
        self.answers = [
            (s, b if isinstance(b, bytes) else json.dumps(b).encode()) for s, b in answers
        ]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Recorder

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.seen.append(
            {
                "method": self.command,
                "target": self.path,
                "body": json.loads(body) if body else None,
                "content_type": self.headers.get("Content-Type"),
                "auth": self.headers.get("Authorization"),
            }
        )
        status, data = self.server.answers.pop(0)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        if self.server.close_silently:
            self.close_connection = True

    do_GET = do_PUT = do_POST = do_DELETE = _answer


@pytest.fixture
def server() -> Iterator[Recorder]:
    srv = Recorder()
    thread = threading.Thread(target=srv.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join()


@pytest.fixture(params=["blocking", "async"])
async def client(request: pytest.FixtureRequest, server: Recorder) -> Any:
    kind = RapiClient if request.param == "blocking" else AsyncRapiClient
    port = server.server_address[1]
    c = kind("127.0.0.1", port, username="alice", password="pw", scheme="http")
    yield c
    if isinstance(c, AsyncRapiClient):
        await c.close()
    else:
        c.close()


async def do(result: Any) -> Any:
    return await result if inspect.isawaitable(result) else result


# call, its arguments, the request it makes: (method, target, body)
WIRE = [
    ("get_info", (), {}, ("GET", "/2/info", None)),
    (
        "get_instance",
        ("a/b c?",),
        {},
        ("GET", "/2/instances/a%2Fb%20c%3F", None),
    ),
    (
        "add_instance_tags",
        ("i1", ["x", "y z"]),
        {"dry_run": True},
        ("PUT", "/2/instances/i1/tags?tag=x&tag=y+z&dry-run=1", None),
    ),
    (
        "reboot_instance",
        ("i1",),
        {"reboot_type": "hard", "ignore_secondaries": False, "shutdown_timeout": 5},
        (
            "POST",
            "/2/instances/i1/reboot?type=hard&ignore_secondaries=0",
            {"shutdown_timeout": 5},
        ),
    ),
    (
        "create_instance",
        ("create", "i1", "diskless", [], []),
        {"os_type": "plain", "dry_run": True},
        (
            "POST",
            "/2/instances?dry-run=1",
            {
                "mode": "create",
                "name": "i1",
                "disk_template": "diskless",
                "disks": [],
                "nics": [],
                "os_type": "plain",
                "__version__": 1,
            },
        ),
    ),
    (
        "reinstall_instance",
        ("i1",),
        {"os": "plain", "no_startup": True},
        ("POST", "/2/instances/i1/reinstall", {"start": False, "os": "plain"}),
    ),
    (
        "set_node_role",
        ("n1", "drained"),
        {"force": True},
        ("PUT", "/2/nodes/n1/role?force=1", "drained"),
    ),
    (
        "grow_instance_disk",
        ("i1", 0, 1024),
        {},
        ("POST", "/2/instances/i1/disk/0/grow", {"amount": 1024}),
    ),
    (
        "query",
        ("instance", ["name"]),
        {"qfilter": ["=", "name", "i1"]},
        ("PUT", "/2/query/instance", {"fields": ["name"], "qfilter": ["=", "name", "i1"]}),
    ),
    (
        "wait_for_job_change",
        (7, ["status"], None, None),
        {},
        (
            "GET",
            "/2/jobs/7/wait",
            {"fields": ["status"], "previous_job_info": None, "previous_log_serial": None},
        ),
    ),
]


@pytest.mark.parametrize(("name", "args", "kwargs", "expected"), WIRE, ids=[w[0] for w in WIRE])
async def test_requests_on_the_wire(
    client: Any, server: Recorder, name: str, args: Any, kwargs: Any, expected: Any
) -> None:
    server.script((200, "1"))
    await do(getattr(client, name)(*args, **kwargs))
    seen = server.seen[0]
    assert (seen["method"], seen["target"], seen["body"]) == expected
    assert seen["content_type"] == "application/json"
    assert seen["auth"] == "Basic YWxpY2U6cHc="  # alice:pw


async def test_answers_are_shaped(client: Any, server: Recorder) -> None:
    server.script(
        (200, "42"),
        (200, [{"id": "i1", "uri": "/2/instances/i1"}]),
        (200, [{"id": "3", "uri": "/2/jobs/3"}]),
    )
    assert await do(client.startup_instance("i1")) == 42  # the wire's "42"
    assert await do(client.get_instances()) == ["i1"]
    assert await do(client.get_jobs()) == [3]


async def test_errors_are_decoded(client: Any, server: Recorder) -> None:
    body = {"code": 404, "message": "Instance &#x27;x&#x27; not known", "explain": "Nothing"}
    server.script((404, body), (502, b"Bad gateway\n"))
    with pytest.raises(RapiError) as err:
        await do(client.get_instance("x"))
    assert (err.value.code, err.value.message, err.value.explain) == (
        404,
        "Instance 'x' not known",
        "Nothing",
    )
    with pytest.raises(RapiError) as err:
        await do(client.get_info())
    assert (err.value.code, err.value.message, err.value.explain) == (502, "Bad gateway", None)


async def test_wait_for_job_follows_the_log(client: Any, server: Recorder) -> None:
    entry1 = [1, [0, 0], "message", "one"]
    entry2 = [2, [0, 0], "message", "two"]
    server.script(
        (200, {"job_info": ["running"], "log_entries": [entry1]}),
        (200, None),  # nothing changed during the server's wait
        (200, {"job_info": ["success"], "log_entries": [entry2]}),
        (200, {"id": 7, "status": "success"}),
    )
    log: list[Any] = []
    status = await do(client.wait_for_job(7, feedback=log.append))
    assert status == {"id": 7, "status": "success"}
    assert log == [entry1, entry2]
    waits = [(s["target"], s["body"]) for s in server.seen]
    assert [w[1]["previous_log_serial"] if w[1] else None for w in waits] == [None, 1, 1, None]
    assert [w[1]["previous_job_info"] if w[1] else None for w in waits] == [
        None,
        ["running"],
        ["running"],
        None,
    ]
    assert waits[-1] == ("/2/jobs/7", None)


def test_blocking_client_retries_a_connection_closed_while_idle(server: Recorder) -> None:
    # The server drops each connection after its answer without announcing it,
    # as a keep-alive time-out does: the next request goes on a new connection.
    server.close_silently = True
    server.script((200, 2), (200, 2))
    with RapiClient("127.0.0.1", server.server_address[1], scheme="http") as c:
        assert c.get_version() == 2
        assert c.get_version() == 2
    assert server.connections == 2
    assert len(server.seen) == 2  # each request sent once
