"""HTTP-level conformance of corral-rapi with Ganeti 3.0.2's RAPI v2: every
resource over real HTTPS with real Basic authentication against a real
cluster; statuses, media types and the answers' shapes (rlib2's field lists,
URI lists, bare job ids, error bodies)."""

from __future__ import annotations

import json
import secrets
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from http import HTTPStatus
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.instances import add, ok
from tests.helpers.jobs import delay_gate_path, release_gate, wait_final
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
    tls_socket,
)

INSTANCE = "web1.example.com"
REALM_HEADER = 'Basic realm="Ganeti Remote API"'
# Ganeti 3.0.2's rlib2 field lists (the keys of bulk answers).
COMMON = ["ctime", "mtime", "uuid", "serial_no", "tags"]
I_FIELDS = [
    "name", "admin_state", "os", "pnode", "snodes", "disk_template",
    "nic.ips", "nic.macs", "nic.modes", "nic.uuids", "nic.names", "nic.links",
    "nic.networks", "nic.networks.names", "nic.bridges", "network_port",
    "disk.sizes", "disk.spindles", "disk_usage", "disk.uuids", "disk.names",
    "beparams", "hvparams", "oper_state", "oper_ram", "oper_vcpus", "status",
    "custom_hvparams", "custom_beparams", "custom_nicparams", *COMMON,
]  # fmt: skip
N_FIELDS = [
    "name", "offline", "master_candidate", "drained", "dtotal", "dfree", "sptotal",
    "spfree", "mtotal", "mnode", "mfree", "pinst_cnt", "sinst_cnt", "ctotal", "cnos",
    "cnodes", "csockets", "pip", "sip", "role", "pinst_list", "sinst_list",
    "master_capable", "vm_capable", "ndparams", "group.uuid", *COMMON,
]  # fmt: skip
G_FIELDS = [
    "alloc_policy", "name", "node_cnt", "node_list", "ipolicy", "custom_ipolicy",
    "diskparams", "custom_diskparams", "ndparams", "custom_ndparams", *COMMON,
]  # fmt: skip
J_FIELDS_BULK = ["id", "ops", "status", "summary", "opstatus", "received_ts", "start_ts", "end_ts"]
J_FIELDS = [*J_FIELDS_BULK, "oplog", "opresult"]
OS_BULK = ["name", "valid", "variants", "parameters", "api_versions", "blacklisted", "hidden"]


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    """A cluster with the OS ``plain``, one running instance and two RAPI users."""
    with running_cluster(tmp_path_factory.mktemp("rapi-http")) as cluster:
        make_os(cluster.paths, "plain", variants=None, parameters={"note": "x", "token": "y"})
        add_users(cluster)
        ok(add(cluster, INSTANCE, "-t", "file", "-s", "8m", "-o", "plain"))
        yield cluster


@pytest.fixture(scope="module")
def anon(cl: TestCluster) -> Rapi:
    return Rapi(cl)


@pytest.fixture(scope="module")
def writer(cl: TestCluster) -> Rapi:
    return Rapi(cl, *WRITE_USER)


@pytest.fixture(scope="module")
def reader(cl: TestCluster) -> Rapi:
    return Rapi(cl, *READ_USER)


def run(cl: TestCluster, job_id: int) -> list[Any]:
    """Wait for the job; its (status, ops, opresult)."""
    with cl.client() as client:
        (row,) = wait_final(client, [job_id], ("status", "ops", "opresult"), timeout=120)
    return row


def assert_error(answer: Answer, status: int) -> dict[str, Any]:
    """An error answer as Ganeti's: JSON {code, message, explain}."""
    assert answer.status == status, (answer.status, answer.body)
    assert answer.content_type == JSON
    body: dict[str, Any] = answer.json
    assert set(body) == {"code", "message", "explain"}
    assert body["code"] == status
    assert body["explain"] == HTTPStatus(status).description
    assert isinstance(body["message"], str) and body["message"]
    return body


def uri_list(key: str, prefix: str) -> Callable[[Any], None]:
    def check(data: Any) -> None:
        assert isinstance(data, list) and data
        for item in data:
            assert set(item) == {key, "uri"}, item
            assert item["uri"] == f"{prefix}{item[key]}"

    return check


def keys_of(fields: list[str], extra: tuple[str, ...] = ()) -> Callable[[Any], None]:
    def check(data: Any) -> None:
        rows = data if isinstance(data, list) else [data]
        assert rows
        for row in rows:
            assert set(row) == {*fields, *extra}, set(row) ^ {*fields, *extra}

    return check


def equals(value: Any) -> Callable[[Any], None]:
    def check(data: Any) -> None:
        assert data == value

    return check


def string_list(data: Any) -> None:
    assert isinstance(data, list) and all(isinstance(item, str) for item in data)


def field_descriptions(data: Any) -> None:
    assert list(data) == ["fields"]
    assert [f["name"] for f in data["fields"]] == ["name", "status"]
    assert all(set(f) == {"name", "title", "kind", "doc"} for f in data["fields"])


def query_result(data: Any) -> None:
    assert set(data) == {"fields", "data"}
    assert [f["name"] for f in data["fields"]] == ["name", "status"]
    assert [[0, INSTANCE], [0, "running"]] in data["data"]


# Open GETs: path → the shape of the answer (Ganeti's).
OPEN_GETS: dict[str, Callable[[Any], None]] = {
    "/": equals(None),
    "/2": equals(None),
    "/version": equals(2),
    "/2/features": equals(
        [
            "instance-create-reqv1",
            "instance-reinstall-reqv1",
            "node-migrate-reqv1",
            "node-evac-res1",
        ]
    ),
    "/2/os": equals(["plain"]),
    "/2/os?bulk=1": keys_of(OS_BULK, ("trusted",)),
    "/2/jobs": uri_list("id", "/2/jobs/"),
    "/2/jobs?bulk=1": keys_of(J_FIELDS_BULK),
    "/2/nodes": uri_list("id", "/2/nodes/"),
    "/2/nodes?bulk=1": keys_of(N_FIELDS),
    "/2/nodes/node1.example.com": keys_of(N_FIELDS, ("secondary_ip",)),
    "/2/nodes/node1.example.com/role": equals("master"),
    "/2/nodes/node1.example.com/tags": equals([]),
    "/2/groups": uri_list("name", "/2/groups/"),
    "/2/groups?bulk=1": keys_of(G_FIELDS),
    "/2/groups/default": keys_of(G_FIELDS),
    "/2/groups/default/tags": equals([]),
    "/2/instances": uri_list("id", "/2/instances/"),
    "/2/instances?bulk=1": keys_of(I_FIELDS),
    f"/2/instances/{INSTANCE}": keys_of(I_FIELDS),
    f"/2/instances/{INSTANCE}/tags": equals([]),
    "/2/tags": string_list,
    "/2/networks": equals([]),
    "/2/filters": equals([]),
    "/2/query/instance/fields?fields=name,status": field_descriptions,
}


@pytest.mark.parametrize("path", sorted(OPEN_GETS))
def test_open_get_answers_ganeti_shapes(anon: Rapi, path: str) -> None:
    answer = anon.request("GET", path)
    assert answer.status == 200, answer.body
    assert answer.content_type == JSON
    OPEN_GETS[path](answer.json)


def test_info_is_the_cluster_info_with_ganeti_aliases(anon: Rapi, cl: TestCluster) -> None:
    info = anon.get("/2/info")
    assert info["name"] == cl.cluster_name
    assert info["master"] == cl.node_name
    assert info["vg_name"] == info["volume_group_name"]
    assert info["drbd_helper"] == info["drbd_usermode_helper"]


def test_instance_bulk_memory_alias(anon: Rapi) -> None:
    inst = anon.get(f"/2/instances/{INSTANCE}")
    assert inst["status"] == "running" and len(inst["disk.sizes"]) == 1
    assert inst["beparams"]["memory"] == inst["beparams"]["maxmem"]


# GETs that need credentials in Ganeti, and the rights that may call them.
RESTRICTED_GETS = {
    "/2/jobs/1/wait": {"write"},
    "/2/query/instance?fields=name,status": {"read", "write"},
    f"/2/instances/{INSTANCE}/console": {"read", "write"},
    "/2/nodes/node1.example.com/storage?storage_type=file&output_fields=name": {"write"},
}


@pytest.mark.parametrize("path", sorted(RESTRICTED_GETS))
def test_restricted_get_needs_credentials(cl: TestCluster, anon: Rapi, path: str) -> None:
    answer = anon.request("GET", path)
    assert_error(answer, 401)
    assert answer.headers["www-authenticate"] == REALM_HEADER
    reader = Rapi(cl, *READ_USER).request("GET", path)
    if "read" in RESTRICTED_GETS[path]:
        assert reader.status == 200, reader.body
    else:
        assert_error(reader, 403)


def test_query_and_console_for_readers(reader: Rapi) -> None:
    answer = reader.request("GET", "/2/query/instance?fields=name,status")
    query_result(answer.json)
    body = {"fields": ["name", "status"], "qfilter": ["=", "name", INSTANCE]}
    answer = reader.request("PUT", "/2/query/instance", body)
    assert answer.status == 200 and answer.json["data"] == [[[0, INSTANCE], [0, "running"]]]
    console = reader.get(f"/2/instances/{INSTANCE}/console")
    assert console["instance"] == INSTANCE and "kind" in console


def test_wrong_credentials_on_an_open_get_are_refused(cl: TestCluster) -> None:
    for user, password in (("writer", "wrong"), ("nobody", "wpw")):
        answer = Rapi(cl, user, password).request("GET", "/2/info")
        assert_error(answer, 401)
        assert answer.headers["www-authenticate"] == REALM_HEADER
    # A scheme other than Basic counts as no valid credentials too.
    answer = Rapi(cl).request("GET", "/2/info", headers={"Authorization": "Digest abc"})
    assert_error(answer, 401)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PUT", "/2/tags?tag=x"),
        ("POST", f"/2/instances/{INSTANCE}/reboot"),
        ("DELETE", f"/2/instances/{INSTANCE}"),
        ("DELETE", "/2/jobs/1"),
    ],
)
def test_writes_need_a_write_user(cl: TestCluster, method: str, path: str) -> None:
    answer = Rapi(cl).request(method, path)
    assert_error(answer, 401)
    assert answer.headers["www-authenticate"] == REALM_HEADER
    assert_error(Rapi(cl, *READ_USER).request(method, path), 403)
    assert Rapi(cl, *READ_USER).get(f"/2/instances/{INSTANCE}")["status"] == "running"


def test_errors_are_ganeti_json(anon: Rapi, writer: Rapi) -> None:
    assert_error(anon.request("GET", "/2/instances/no-such.example.com"), 404)
    assert_error(anon.request("GET", "/2/nosuchthing"), 404)
    body = assert_error(anon.request("PATCH", "/2/info"), 501)
    assert body["message"] == "Method PATCH is unsupported for path /2/info"
    assert_error(writer.request("PUT", "/2/tags?tag=a", raw=b"[]", content_type="text/x"), 415)
    assert_error(writer.request("PUT", "/2/tags?tag=a", raw=b"{nope"), 400)


def test_tags_jobs_and_job_resources(cl: TestCluster, writer: Rapi, anon: Rapi) -> None:
    job_id = writer.job("PUT", "/2/tags?tag=alpha&tag=beta")
    assert run(cl, job_id)[0] == "success"
    assert {"alpha", "beta"} <= set(anon.get("/2/tags"))
    jobs = anon.get("/2/jobs")
    assert {"id": job_id, "uri": f"/2/jobs/{job_id}"} in jobs
    job = anon.get(f"/2/jobs/{job_id}")
    assert set(job) == set(J_FIELDS)
    assert job["id"] == job_id and job["status"] == "success"
    assert [op["OP_ID"] for op in job["ops"]] == ["OP_TAGS_SET"]
    assert job["ops"][0]["tags"] == ["alpha", "beta"]
    assert run(cl, writer.job("DELETE", "/2/tags?tag=beta"))[0] == "success"
    assert "beta" not in anon.get("/2/tags")
    # As Ganeti 3.0.2 (whose job query always answers the "id" field): an
    # unknown job is its id with every other field null, not a 404.
    unknown = anon.get("/2/jobs/99999")
    assert unknown == {name: 99999 if name == "id" else None for name in J_FIELDS}


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("node", "/2/nodes/node1.example.com/tags"),
        ("group", "/2/groups/default/tags"),
        ("instance", f"/2/instances/{INSTANCE}/tags"),
    ],
)
def test_object_tags(cl: TestCluster, writer: Rapi, kind: str, path: str) -> None:
    assert run(cl, writer.job("PUT", f"{path}?tag=t-{kind}"))[0] == "success"
    assert writer.get(path) == [f"t-{kind}"]
    assert run(cl, writer.job("DELETE", f"{path}?tag=t-{kind}"))[0] == "success"
    assert writer.get(path) == []


def _ops(anon: Rapi, job_id: int) -> list[str]:
    return [op["OP_ID"] for op in anon.get(f"/2/jobs/{job_id}")["ops"]]


@pytest.mark.parametrize(
    ("path", "body", "ops"),
    [
        (
            "reinstall",
            None,
            ["OP_INSTANCE_SHUTDOWN", "OP_INSTANCE_REINSTALL", "OP_INSTANCE_STARTUP"],
        ),
        ("reinstall", {"os": "plain", "start": True}, ["SHUTDOWN", "REINSTALL", "STARTUP"]),
        ("reinstall?os=plain&nostartup=1", None, ["SHUTDOWN", "REINSTALL"]),
        ("reinstall", {"start": False}, ["SHUTDOWN", "REINSTALL"]),
    ],
)
def test_reinstall_is_one_job_of_three_opcodes(
    cl: TestCluster, writer: Rapi, anon: Rapi, path: str, body: Any, ops: list[str]
) -> None:
    job_id = writer.job("POST", f"/2/instances/{INSTANCE}/{path}", body)
    expected = [op if op.startswith("OP_") else f"OP_INSTANCE_{op}" for op in ops]
    assert _ops(anon, job_id) == expected
    assert run(cl, job_id)[0] == "success"
    state = "running" if expected[-1] == "OP_INSTANCE_STARTUP" else "ADMIN_down"
    assert anon.get(f"/2/instances/{INSTANCE}")["status"] == state
    if state != "running":
        assert run(cl, writer.job("PUT", f"/2/instances/{INSTANCE}/startup"))[0] == "success"


def test_dry_run_submits_a_dry_job_and_changes_nothing(
    cl: TestCluster, writer: Rapi, anon: Rapi
) -> None:
    tags = anon.get("/2/tags")
    job_id = writer.job("PUT", "/2/tags?tag=dry&dry-run=1")
    status, ops, _result = run(cl, job_id)
    assert status == "success" and ops[0]["dry_run"] is True
    assert anon.get("/2/tags") == tags
    body = _create_body(cl, "dry.example.com")
    job_id = writer.job("POST", "/2/instances?dry-run=1", body)
    status, ops, _result = run(cl, job_id)
    assert status == "success" and ops[0]["dry_run"] is True
    assert "dry.example.com" not in [i["id"] for i in anon.get("/2/instances")]
    assert_error(anon.request("GET", "/2/instances/dry.example.com"), 404)


def test_instance_operations(cl: TestCluster, writer: Rapi, anon: Rapi) -> None:
    base = f"/2/instances/{INSTANCE}"

    def done(method: str, path: str, body: Any = None) -> list[Any]:
        row = run(cl, writer.job(method, base + path, body))
        assert row[0] == "success", row
        return row

    done("PUT", "/shutdown", {"timeout": 0})
    assert anon.get(base)["status"] == "ADMIN_down"
    done("PUT", "/startup")
    assert anon.get(base)["status"] == "running"
    done("POST", "/reboot?type=soft")
    done("PUT", "/modify", {"beparams": {"maxmem": 256, "minmem": 256}})
    assert anon.get(base)["beparams"]["maxmem"] == 256
    (size,) = anon.get(base)["disk.sizes"]
    done("POST", "/disk/0/grow", {"amount": 4})
    assert anon.get(base)["disk.sizes"] == [size + 4]
    _status, _ops, result = done("GET", "/info?static=1")
    assert INSTANCE in result[0]
    # Rename (stopped) there and back: the other tests use the name.
    done("PUT", "/shutdown", {"timeout": 0})
    done("PUT", "/rename", {"new_name": "web2.example.com", "name_check": False, "ip_check": False})
    assert anon.get("/2/instances/web2.example.com")["name"] == "web2.example.com"
    back = {"new_name": INSTANCE, "name_check": False, "ip_check": False}
    assert run(cl, writer.job("PUT", "/2/instances/web2.example.com/rename", back))[0] == "success"
    done("PUT", "/startup")
    assert anon.get(base)["status"] == "running"


def _create_body(cl: TestCluster, name: str) -> dict[str, Any]:
    """POST /2/instances: a diskless instance of the "plain" OS on the node."""
    return {
        "__version__": 1,
        "mode": "create",
        "name": name,
        "disk_template": "diskless",
        "disks": [],
        "nics": [],
        "os": "plain",
        "pnode": cl.node_name,
        "name_check": False,
        "ip_check": False,
    }


def test_create_and_remove_an_instance(cl: TestCluster, writer: Rapi, anon: Rapi) -> None:
    name = "made-by-rapi.example.com"
    body = _create_body(cl, name)
    assert run(cl, writer.job("POST", "/2/instances", body))[0] == "success"
    assert anon.get(f"/2/instances/{name}")["status"] == "running"
    assert_error(writer.request("POST", "/2/instances", {**body, "__version__": 0}), 400)
    assert run(cl, writer.job("DELETE", f"/2/instances/{name}"))[0] == "success"
    assert_error(anon.request("GET", f"/2/instances/{name}"), 404)


def test_private_parameters_redacted_and_secret_ones_never_stored(
    cl: TestCluster, writer: Rapi, anon: Rapi
) -> None:
    private, secret = f"PRIV-{secrets.token_hex(8)}", f"SECR-{secrets.token_hex(8)}"
    name = "private.example.com"
    body = {
        **_create_body(cl, name),
        "start": False,
        "osparams_private": {"note": private},
        "osparams_secret": {"token": secret},
    }
    job_id = writer.job("POST", "/2/instances", body)
    assert run(cl, job_id)[0] == "success"
    answer = anon.request("GET", f"/2/jobs/{job_id}")
    assert private not in answer.body.decode() and secret not in answer.body.decode()
    (op,) = answer.json["ops"]
    assert op["osparams_private"] == {"note": "<redacted>"}
    assert op["osparams_secret"] == {"token": "<redacted>"}
    bulk = anon.request("GET", "/2/jobs?bulk=1").body.decode()
    assert private not in bulk and secret not in bulk
    assert not _files_containing(cl.paths.root, secret.encode())
    assert run(cl, writer.job("DELETE", f"/2/instances/{name}"))[0] == "success"


def _files_containing(root: Path, needle: bytes) -> list[Path]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                if needle in path.read_bytes():
                    found.append(path)
            except OSError:
                continue
    return found


class _Waiter(threading.Thread):
    """A GET /2/jobs/[id]/wait in a thread; its answer and when it came."""

    def __init__(self, writer: Rapi, job_id: int, body: dict[str, Any]) -> None:
        super().__init__(daemon=True)
        self.writer, self.job_id, self.body = writer, job_id, body
        self.answer: Answer | None = None
        self.answered_at = 0.0
        self.started = threading.Event()

    def run(self) -> None:
        self.started.set()
        self.answer = self.writer.request("GET", f"/2/jobs/{self.job_id}/wait", self.body)
        self.answered_at = time.monotonic()


def _gated_job(cl: TestCluster) -> tuple[int, str]:
    """A running job held by a gate; its id and the gate."""
    with cl.client() as client:
        job_id = client.submit_job(
            [{"OP_ID": "OP_TEST_DELAY", "duration": 600, "interruptible": True, "on_master": True}]
        )
        return job_id, delay_gate_path(client, job_id)


def _latest_serial(anon: Rapi, job_id: int) -> int:
    return int(max(entry[0] for ops in anon.get(f"/2/jobs/{job_id}")["oplog"] for entry in ops))


def test_wait_answers_as_soon_as_the_job_changes(cl: TestCluster, writer: Rapi, anon: Rapi) -> None:
    job_id, gate = _gated_job(cl)
    serial = _latest_serial(anon, job_id)
    body = {"fields": ["status"], "previous_job_info": ["running"], "previous_log_serial": serial}
    waiter = _Waiter(writer, job_id, body)
    waiter.start()
    waiter.started.wait()
    # The wait is in progress (it is answered only on a change or after 10 s).
    assert waiter.answer is None
    released = time.monotonic()
    release_gate(gate)
    waiter.join(30)
    assert waiter.answer is not None and waiter.answer.status == 200, waiter.answer
    result = waiter.answer.json
    assert set(result) == {"job_info", "log_entries"}
    # The first change may be the log entry of the release, the job still running.
    assert result["job_info"] != ["running"] or result["log_entries"], result
    # Subscription-based: answered on the change, long before the 10 s timeout
    # (generous: the issue asks for 50 ms; this machine is shared).
    assert waiter.answered_at - released < 5
    assert run(cl, job_id)[0] == "success"
    # A finished job's wait answers at once with its final state.
    final = writer.request("GET", f"/2/jobs/{job_id}/wait", body)
    assert final.status == 200 and final.json["job_info"] == ["success"]
    # An unknown job: masterd's "job lost" error, a 500 as in Ganeti 3.0.2.
    lost = assert_error(writer.request("GET", "/2/jobs/99999/wait", body), 500)
    assert "99999" in lost["message"]
    assert_error(writer.request("GET", f"/2/jobs/{job_id}/wait", {"fields": "status"}), 400)


@pytest.mark.slow
def test_wait_answers_null_when_nothing_changed(cl: TestCluster, writer: Rapi, anon: Rapi) -> None:
    job_id, gate = _gated_job(cl)
    try:
        serial = _latest_serial(anon, job_id)
        body = {
            "fields": ["status"],
            "previous_job_info": ["running"],
            "previous_log_serial": serial,
        }
        answer = writer.request("GET", f"/2/jobs/{job_id}/wait", body)
        assert answer.status == 200 and answer.content_type == JSON
        assert answer.body == b"null"
    finally:
        release_gate(gate)
    assert run(cl, job_id)[0] == "success"


def test_cancel_a_job(cl: TestCluster, writer: Rapi, anon: Rapi) -> None:
    with cl.client() as client:
        job_id = client.submit_job(
            [{"OP_ID": "OP_TEST_DELAY", "duration": 600, "interruptible": True, "on_master": True}]
        )
        gate = delay_gate_path(client, job_id)
    answer = writer.request("DELETE", f"/2/jobs/{job_id}")
    assert answer.status == 200 and answer.content_type == JSON
    try:
        assert isinstance(answer.json, list) and len(answer.json) == 2, answer.json
    finally:
        release_gate(gate)
    run(cl, job_id)
    assert anon.get(f"/2/jobs/{job_id}")["status"] in ("canceled", "success")


# --- the HTTP connection --------------------------------------------------------


def test_requests_share_one_kept_alive_connection(writer: Rapi) -> None:
    conn = writer.connection()
    conn.connect()
    sock = conn.sock
    try:
        for path in ("/version", "/2/info", f"/2/instances/{INSTANCE}", "/2/nosuch"):
            conn.request("GET", path, headers={"Authorization": writer.auth or ""})
            answer = conn.getresponse()
            answer.read()
            assert answer.status == (404 if path == "/2/nosuch" else 200)
            assert answer.getheader("Connection") is None
        assert conn.sock is sock  # never reopened
    finally:
        conn.close()


def _read_answer(sock: ssl.SSLSocket) -> tuple[bytes, bytes]:
    """One answer's head and its body (by its Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        body += sock.recv(65536)
    assert len(body) == length  # nothing more: the next answer's start would be lost
    return head, body


def test_pipelined_requests_are_answered_in_order(cl: TestCluster) -> None:
    with tls_socket(cl) as sock:
        sock.sendall(
            b"GET /version HTTP/1.1\r\nHost: rapi\r\n\r\n"
            b"GET /2/nosuch HTTP/1.1\r\nHost: rapi\r\n\r\n"
            b"GET /2/features HTTP/1.1\r\nHost: rapi\r\nConnection: close\r\n\r\n"
        )
        answers = [_read_answer(sock) for _ in range(3)]
        assert sock.recv(1) == b""  # closed after the third, as asked
    assert [head.split(b" ")[1] for head, _ in answers] == [b"200", b"404", b"200"]
    assert answers[0][1] == b"2"


@pytest.mark.parametrize("user", [WRITE_USER, None], ids=["writer", "anonymous"])
def test_expect_100_continue(cl: TestCluster, user: tuple[str, str] | None) -> None:
    """As pycurl asks for a large body: the body is asked for only once the
    request may go on; a refusal comes instead."""
    body = b'{"padding": "' + b"x" * 4000 + b'"}'
    head = (
        "PUT /2/tags?tag=continued&dry-run=1 HTTP/1.1\r\nHost: rapi\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Expect: 100-continue\r\n"
    )
    if user is not None:
        head += f"Authorization: {basic(*user)}\r\n"
    with tls_socket(cl) as sock:
        sock.sendall(head.encode() + b"\r\n")
        first, _ = _read_answer(sock)
        if user is None:
            assert first.startswith(b"HTTP/1.1 401 "), first
            return
        assert first == b"HTTP/1.1 100 Continue", first
        sock.sendall(body)
        final, answer = _read_answer(sock)
    assert final.startswith(b"HTTP/1.1 200 "), final
    assert int(json.loads(answer)) > 0


def test_require_authentication_closes_every_get(tmp_path: Path) -> None:
    with rapi_cluster(tmp_path, "--require-authentication") as cl:
        add_users(cl)
        for path in ("/", "/version", "/2/info", "/2/instances", "/2/openapi.json"):
            answer = Rapi(cl).request("GET", path)
            assert_error(answer, 401)
            assert answer.headers["www-authenticate"] == REALM_HEADER
            assert Rapi(cl, *READ_USER).request("GET", path).status == 200
        assert Rapi(cl, *WRITE_USER).get("/version") == 2
        assert_error(Rapi(cl, *READ_USER).request("PUT", "/2/tags?tag=a"), 403)
