"""A query's filter cannot monopolise masterd: a regular expression that
backtracks catastrophically gets a clear error within the filter budget
(FILTER_BUDGET seconds of the event loop at most), and other clients are
answered, not starved."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from corral import constants as C
from corral.luxi import protocol
from corral.query.filter import FILTER_BUDGET
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.jobs import RawLuxi, wait_final
from tests.helpers.opcodes import with_required
from tests.helpers.osdef import make_os

NAMES = [f"{'a' * 30}{i}" for i in range(10)]
# Exponential backtracking for Python's re over each name: (a|a)+ can match
# the 30 a's in 2**30 ways before the digit makes every one of them fail.
PATHOLOGICAL = "^(a|a)+$"


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("query-budget")) as cluster:
        make_os(cluster.paths, "dummy")
        ops = [
            with_required(
                "OP_INSTANCE_CREATE",
                instance_name=name,
                disk_template="diskless",
                os_type="dummy+default",
                name_check=False,
                ip_check=False,
                no_install=True,
                start=False,
            )
            for name in NAMES
        ]
        with cluster.client() as client:
            job_ids = [job_id for _ok, job_id in client.submit_many_jobs([[op] for op in ops])]
            rows = wait_final(client, job_ids, ("status", "opresult"))
        assert all(row[0] == C.JOB_STATUS_SUCCESS for row in rows), rows
        yield cluster


def send(conn: RawLuxi, method: str, *args: object) -> None:
    conn.sock.sendall(protocol.encode_request(method, list(args)))


def test_pathological_regex_gets_clear_error_and_others_are_served(cl: TestCluster) -> None:
    with RawLuxi(cl.paths.master_socket, timeout=60) as slow, cl.client() as ping:
        ping.call("QueryClusterInfo")  # connected and warm before the race
        send(slow, "Query", C.QR_INSTANCE, ["name"], ["=~", "name", PATHOLOGICAL])
        info = ping.call("QueryClusterInfo")
        answer = json.loads(slow.exchange(b""))
    assert info["name"] == cl.cluster_name
    assert answer["success"] is False
    cls, (message, ecode) = answer["result"]
    assert (cls, ecode) == ("OpPrereqError", C.ECODE_INVAL)
    assert f"took more than {FILTER_BUDGET} s" in message
    assert PATHOLOGICAL in message and "simplify the expression" in message


def test_the_issues_regex_and_sane_ones_answer(cl: TestCluster) -> None:
    with cl.client() as client:
        # The issue's example backtracks in Python's re, not in the engine used.
        issue = client.query(C.QR_INSTANCE, ["name"], ["=~", "name", "^(.+)+Z$"])
        sane = client.query(C.QR_INSTANCE, ["name"], ["=~", "name", "a{30}[13]$"])
        jobs = client.query(C.QR_JOB, ["id"], ["=~", "summary", PATHOLOGICAL])
    assert issue["data"] == []
    assert sorted(row[0][1] for row in sane["data"]) == [NAMES[1], NAMES[3]]
    assert jobs["data"] == []  # summaries are short: no budget needed


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("((a{1000}){1000}){1000}", "repeats too much"),
        ("x" * 20_000, "too long"),
        ("(a", "Invalid regular expression"),
    ],
)
def test_regex_too_big_to_compile_is_refused(cl: TestCluster, pattern: str, text: str) -> None:
    with RawLuxi(cl.paths.master_socket) as raw:
        answer = json.loads(
            raw.exchange(
                protocol.encode_request("Query", [C.QR_INSTANCE, ["name"], ["=~", "name", pattern]])
            )
        )
    assert answer["success"] is False
    assert answer["result"][0] == "QueryFilterParseError"
    assert text in answer["result"][1][0]
