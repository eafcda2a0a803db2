"""Ganeti 3.0.2's luxi client library against Corral's masterd.

Each luxi method is called through ``ganeti.luxi.Client`` (and, for queries,
decoded with Ganeti's own response objects) and through Corral's client; both
must give the same answer, or the same error class and message.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral import errors
from tests.conformance.ganeti import run_ganeti_python
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.jobs import delay_gate_path, release_gate, wait_final
from tests.helpers.osdef import make_os

INSTANCE = "inst1.example.com"

# Runs in Ganeti's Python: calls the methods given on stdin, prints the answers.
_CALLER = r"""
import json
cl = luxi.Client()
out = []
for method, args in json.loads(CALLS):
    try:
        if method == "Query":
            value = cl.Query(*args).ToDict()
        elif method == "QueryFields":
            value = cl.QueryFields(*args).ToDict()
        else:
            value = cl.CallMethod(method, args)
        out.append({"ok": value})
    except errors.GenericError as err:
        out.append({"error": [err.__class__.__name__, list(err.args)]})
print(json.dumps(out))
"""


def ganeti_calls(cl: TestCluster, calls: list[tuple[str, list[Any]]]) -> list[dict[str, Any]]:
    code = f"CALLS = {json.dumps(calls)!r}\n{_CALLER}"
    result = run_ganeti_python(cl.paths.root, code)
    assert result.rc == 0, result.stderr
    answers: list[dict[str, Any]] = json.loads(result.stdout)
    return answers


def corral_calls(cl: TestCluster, calls: list[tuple[str, list[Any]]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with cl.client() as client:
        for method, args in calls:
            try:
                out.append({"ok": json.loads(json.dumps(client.call(method, *args)))})
            except errors.GenericError as err:
                out.append({"error": [err.__class__.__name__, list(err.args)]})
    return out


@pytest.fixture(scope="module")
def lcluster(ganeti: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    """A cluster with an OS definition, one instance and a few finished jobs."""
    with running_cluster(tmp_path_factory.mktemp("luxi")) as cl:
        make_os(cl.paths, "debootstrap", parameters={"dhcp": "use DHCP"})
        added = cl.gnt(
            "instance", "add", "-t", "file", "--disk", "0:size=16m", "-o",
            "debootstrap+default", "--no-name-check", "--no-ip-check", INSTANCE,
        )  # fmt: skip
        assert added.rc == 0, added.stderr
        assert cl.gnt("cluster", "add-tags", "web", "prod").rc == 0
        yield cl


def same(cl: TestCluster, calls: list[tuple[str, list[Any]]]) -> list[dict[str, Any]]:
    """The answers, asserted equal through both clients."""
    theirs = ganeti_calls(cl, calls)
    ours = corral_calls(cl, calls)
    for call, their, our in zip(calls, theirs, ours, strict=True):
        assert their == our, call
    return theirs


def test_read_only_methods_answer_alike(lcluster: TestCluster) -> None:
    answers = same(
        lcluster,
        [
            ("QueryConfigValues", [["cluster_name", "master_node", "drain_flag", "watcher_pause"]]),
            ("QueryConfigValues", [["modify_ssh_setup", "ssh_key_type", "ssh_key_bits", "nope"]]),
            ("QueryTags", ["cluster", ""]),
            ("QueryInstances", [[], ["name", "os", "admin_state", "disk_template"], False]),
            ("QueryInstances", [[INSTANCE], ["name", "pnode", "be/maxmem"], False]),
            ("QueryNodes", [[], ["name", "pinst_list", "sinst_list"], False]),
            ("QueryGroups", [[], ["name", "node_cnt"], False]),
            ("QueryNetworks", [[], ["name"], False]),
            ("QueryExports", [[], False]),
            ("QueryJobs", [[1, 999], ["id", "status", "summary"]]),
        ],
    )
    assert answers[0]["ok"] == ["cluster.example.com", "node1.example.com", False, None]
    assert answers[1]["ok"] == [False, "rsa", 2048, None]
    assert answers[2]["ok"] == ["prod", "web"]
    assert answers[3]["ok"] == [[INSTANCE, "debootstrap+default", "up", "file"]]
    assert answers[5]["ok"] == [["node1.example.com", [INSTANCE], []]]
    assert answers[7]["ok"] == []
    assert answers[8]["ok"] == []
    assert answers[9]["ok"] == [[1, "success", ["CLUSTER_POST_INIT"]], [999, None, None]]


def test_classic_query_errors_as_luxid(lcluster: TestCluster) -> None:
    calls_made: list[tuple[str, list[Any]]] = [
        ("QueryInstances", [["no-such-instance"], ["name"], False]),
        ("QueryInstances", [[], ["name", "bogus"], False]),
        ("QueryInstances", [[], ["name"], True]),
        ("QueryNodes", [["no-such-node"], ["name"], False]),
        ("QueryNetworks", [["net1"], ["name"], False]),
        ("QueryExports", [["no-such-node"], False]),
    ]
    answers = same(lcluster, calls_made)
    # luxid's classic queries ask by name or uuid: an unknown one answers
    # nothing (ganeti/ganeti#922), where names alone are refused if unknown.
    # Exports have no uuid: their classic query names the nodes alone.
    for index in (0, 3, 4):
        assert answers[index]["ok"] == [], calls_made[index]
    assert answers[5]["error"] == [
        "OpPrereqError",
        ["Node name no-such-node not found", "unknown_entity"],
    ]
    assert answers[1]["error"] == [
        "OpPrereqError",
        ["Unknown output fields selected: bogus", "wrong_input"],
    ]
    assert answers[2]["error"] == ["OpPrereqError", ["Sync queries are not allowed", "wrong_input"]]


KEY_FIELD = {"job": "id", "export": "node"}


@pytest.mark.parametrize(
    "resource", ["instance", "node", "group", "os", "job", "lock", "network", "export"]
)
def test_query_and_fields_decode_in_ganeti(lcluster: TestCluster, resource: str) -> None:
    key = KEY_FIELD.get(resource, "name")
    same(lcluster, [("QueryFields", [resource, None]), ("Query", [resource, [key], None])])


def test_archived_jobs_are_found_by_id(lcluster: TestCluster) -> None:
    with lcluster.client() as client:
        job_id = client.submit_job([{"OP_ID": "OP_TEST_DELAY", "duration": 0}])
        lcluster_wait(client, job_id)
        assert client.call("ArchiveJob", job_id) is True
    answers = same(
        lcluster,
        [
            ("QueryJobs", [[job_id], ["id", "status", "archived"]]),
            ("Query", ["job", ["id", "status", "archived"], ["=", "id", job_id]]),
        ],
    )
    assert answers[0]["ok"] == [[job_id, "success", True]]
    assert answers[1]["ok"]["data"] == [[[0, job_id], [0, "success"], [0, True]]]


def lcluster_wait(client: Any, job_id: int) -> None:
    """Wait for a job through WaitForJobChange (no sleeping)."""
    info: Any = None
    while True:
        result = client.wait_for_job_change(job_id, ["status"], info, 0)
        if result != "nochange":
            info = result[0]
            if info[0] in ("success", "error", "canceled"):
                return


def test_watcher_pause_round_trip(lcluster: TestCluster) -> None:
    until = 4102444800  # 2100-01-01
    answers = ganeti_calls(
        lcluster,
        [
            ("SetWatcherPause", [until]),
            ("QueryConfigValues", [["watcher_pause"]]),
            ("SetWatcherPause", [None]),
            ("QueryConfigValues", [["watcher_pause"]]),
        ],
    )
    assert [a["ok"] for a in answers] == [float(until), [until], None, [None]]


def test_job_methods_through_ganeti(lcluster: TestCluster) -> None:
    """Ganeti's client drives a job's whole life: drained submission, many jobs,
    priority change, cancel, auto-archive; PickupJob is luxid-internal."""
    delay = {"OP_ID": "OP_TEST_DELAY", "duration": 0}
    gate = {**delay, "duration": 300, "interruptible": True}
    first = ganeti_calls(
        lcluster,
        [
            ("SetDrainFlag", [True]),
            ("SubmitJob", [[delay]]),
            ("SubmitJobToDrainedQueue", [[gate]]),
            ("SetDrainFlag", [False]),
        ],
    )
    assert first[1]["error"][0] == "JobQueueDrainError"
    gate_id = first[2]["ok"]
    with lcluster.client() as client:
        gate_path = delay_gate_path(client, gate_id)
    held = {**delay, "depends": [[gate_id, ["success"]]]}
    (many,) = ganeti_calls(lcluster, [("SubmitManyJobs", [[[held], [held]]])])
    (ok_a, job_a), (ok_b, job_b) = many["ok"]
    assert ok_a and ok_b
    second = ganeti_calls(
        lcluster,
        [
            ("ChangeJobPriority", [job_a, 10]),
            ("CancelJob", [job_b]),
            ("PickupJob", [job_a]),
            ("QueryJobs", [[job_a, job_b], ["status", "priority"]]),
        ],
    )
    assert second[0]["ok"][0] is True
    assert second[1]["ok"][0] is True
    assert second[2]["error"][0] == "GenericError"
    assert second[3]["ok"] == [["waiting", 10], ["canceled", 0]]
    release_gate(gate_path)
    with lcluster.client() as client:
        assert wait_final(client, [gate_id, job_a]) == [["success"], ["success"]]
    third = ganeti_calls(
        lcluster,
        [("AutoArchiveJobs", [0, 30]), ("QueryJobs", [[gate_id, job_a, job_b], ["archived"]])],
    )
    archived, remaining = third[0]["ok"]
    assert archived >= 3 and remaining == 0
    assert third[1]["ok"] == [[True], [True], [True]]
