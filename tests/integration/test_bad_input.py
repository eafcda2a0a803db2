"""Bad input and faults against real daemons: each gets a clear error and the
right exit code, changes nothing, and leaves the daemons serving."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from corral import errors
from corral.process.daemons import running_pid
from tests.helpers.cluster import Result, TestCluster, new_root, running_cluster
from tests.helpers.jobs import RawLuxi, cluster_state, wait_final

NOT_CLUSTER = "Cluster not initialized"


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    """One cluster for the whole module: every test leaves it as it found it."""
    with running_cluster(tmp_path_factory.mktemp("bad-input")) as cluster:
        yield cluster


@pytest.fixture
def before(cl: TestCluster) -> Iterator[dict[str, Any]]:
    """The cluster's state before the test; afterwards the daemons must still serve."""
    yield cluster_state(cl)
    assert_serving(cl)


def assert_serving(cl: TestCluster) -> None:
    listing = cl.gnt("job", "list")
    assert listing.rc == 0, listing.stderr
    assert listing.stdout.splitlines()[0].split() == ["ID", "Status", "Summary"]


def failed(result: Result, rc: int, *texts: str) -> str:
    """Assert a command failed with ``rc`` and ``texts`` on stderr; returns stderr."""
    assert result.rc == rc, (result.rc, result.stdout, result.stderr)
    for text in texts:
        assert text in result.stderr, (text, result.stderr)
    assert "Traceback" not in result.stderr
    return result.stderr


def new_jobs(cl: TestCluster, before: dict[str, Any]) -> list[int]:
    known = {row[0] for row in before["jobs"]}
    return [row[0] for row in cluster_state(cl)["jobs"] if row[0] not in known]


# Luxi framing and requests
BAD_FRAMES = [
    pytest.param(b"\xff\xfe\x00garbage", "not JSON", id="garbage-bytes"),
    pytest.param(b'{"method": "QueryJobs", "args": [', "not JSON", id="truncated-json"),
    pytest.param(b"[1, 2, 3]", "expected an object", id="json-list"),
    pytest.param(b'"QueryJobs"', "expected an object", id="json-string"),
    pytest.param(b"42", "expected an object", id="json-number"),
    pytest.param(b'{"args": []}', "expected an object", id="missing-method"),
    pytest.param(b'{"method": "QueryJobs"}', "expected an object", id="missing-args"),
    pytest.param(b'{"method": "NoSuchMethod", "args": []}', "NoSuchMethod", id="unknown-method"),
    pytest.param(b'{"method": 17, "args": []}', "17", id="method-not-string"),
    pytest.param(
        b'{"method": "QueryJobs", "args": [null, ["id"]], "version": 1}',
        "version",
        id="version-mismatch",
    ),
]


@pytest.mark.parametrize(("frame", "text"), BAD_FRAMES)
def test_malformed_frame_gets_error_and_connection_goes_on(
    cl: TestCluster, before: dict[str, Any], frame: bytes, text: str
) -> None:
    with RawLuxi(cl.paths.master_socket) as raw:
        answer = json.loads(raw.exchange(frame + b"\x03"))
        assert answer["success"] is False
        # luxid's form for a request it cannot parse: a plain string.
        assert isinstance(answer["result"], str)
        assert answer["result"].startswith("Failed to parse request: ")
        assert text in answer["result"]
        assert "\n" not in answer["result"]
        # The same connection answers a valid request afterwards.
        good = raw.exchange(b'{"method": "QueryConfigValues", "args": [["cluster_name"]]}\x03')
        assert json.loads(good) == {"success": True, "result": [cl.cluster_name]}
    assert cluster_state(cl) == before


def test_bad_arguments_are_errors_on_a_living_connection(
    cl: TestCluster, before: dict[str, Any]
) -> None:
    requests = [
        (b'{"method": "QueryJobs", "args": "not a list"}', "LuxiError", "must be a JSON list"),
        (b'{"method": "QueryJobs", "args": [null]}', "LuxiError", "takes 2 argument(s), got 1"),
        (b'{"method": "ArchiveJob", "args": ["x"]}', "OpPrereqError", "Invalid job id"),
        (b'{"method": "CancelJob", "args": [-4]}', "OpPrereqError", "Invalid job id"),
        (b'{"method": "SetDrainFlag", "args": ["yes"]}', "OpPrereqError", "true or false"),
        (b'{"method": "SubmitManyJobs", "args": [{}]}', "LuxiError", "list of jobs"),
    ]
    with RawLuxi(cl.paths.master_socket) as raw:
        for frame, error_class, text in requests:
            answer = json.loads(raw.exchange(frame + b"\x03"))
            assert answer["success"] is False, frame
            name, args = answer["result"]
            assert name == error_class, answer
            assert text in args[0], answer
        good = raw.exchange(b'{"method": "QueryJobs", "args": [[1], ["id", "status"]]}\x03')
        assert json.loads(good) == {"success": True, "result": [[1, "success"]]}
    assert cluster_state(cl) == before


def test_unknown_config_value_is_null(cl: TestCluster, before: dict[str, Any]) -> None:
    # As luxid: names it does not know give null rather than an error.
    with cl.client() as client:
        values = client.call("QueryConfigValues", ["no_such_value", "cluster_name", "drain_flag"])
    assert values == [None, cl.cluster_name, False]
    assert cluster_state(cl) == before


def test_client_leaving_mid_frame_does_not_hurt(cl: TestCluster, before: dict[str, Any]) -> None:
    with RawLuxi(cl.paths.master_socket) as raw:
        raw.sock.sendall(b'{"method": "SubmitJob", "args": [[{"OP_ID": "OP_TEST_DELAY"')
    assert cluster_state(cl) == before


def test_unknown_opcode_is_refused(cl: TestCluster, before: dict[str, Any]) -> None:
    with RawLuxi(cl.paths.master_socket) as raw:
        answer = json.loads(
            raw.exchange(b'{"method": "SubmitJob", "args": [[{"OP_ID": "OP_NO_SUCH_THING"}]]}\x03')
        )
    assert answer == {
        "success": False,
        "result": ["OpCodeUnknown", ["Unknown opcode 'OP_NO_SUCH_THING'"]],
    }
    with cl.client() as client, pytest.raises(errors.OpCodeUnknown):
        client.submit_job([{"duration": 1}])  # no OP_ID at all
    assert cluster_state(cl) == before


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("duration", "abc"),
        ("duration", -1),
        ("priority", 99),
        ("dry_run", "yes"),
        ("repeat", 1.5),
        ("on_nodes", "node1"),
        ("depends", [[1, ["finished"]]]),
        ("reason", "because"),
    ],
)
def test_wrong_field_type_is_refused_naming_the_field(
    cl: TestCluster, before: dict[str, Any], field: str, value: Any
) -> None:
    op = {"OP_ID": "OP_TEST_DELAY", "duration": 0, field: value}
    with cl.client() as client, pytest.raises(errors.OpPrereqError) as info:
        client.submit_job([op])
    assert info.value.ecode == C.ECODE_INVAL
    assert f"'{field}'" in info.value.message
    assert "\n" not in info.value.message
    assert cluster_state(cl) == before


def test_unknown_parameter_is_refused(cl: TestCluster, before: dict[str, Any]) -> None:
    op = {"OP_ID": "OP_TEST_DELAY", "duration": 0, "no_such_param": 1}
    with cl.client() as client, pytest.raises(errors.OpPrereqError) as info:
        client.submit_job([op])
    assert info.value.ecode == C.ECODE_INVAL
    assert "unknown parameter 'no_such_param'" in info.value.message
    assert cluster_state(cl) == before


def test_bad_job_refuses_its_whole_batch(cl: TestCluster, before: dict[str, Any]) -> None:
    good = [{"OP_ID": "OP_TEST_DELAY", "duration": 0}]
    bad = [{"OP_ID": "OP_TEST_DELAY", "duration": "soon"}]
    batches: list[tuple[list[Any], str]] = [
        ([good, bad, good], "Job 2 of 3 submitted: "),
        ([good, []], "non-empty"),
    ]
    with cl.client() as client:
        for jobs, wanted in batches:
            with pytest.raises(errors.OpPrereqError) as info:
                client.submit_many_jobs(jobs)
            assert wanted in info.value.message
    assert cluster_state(cl) == before
    assert new_jobs(cl, before) == []


def test_bad_duration_on_the_command_line(cl: TestCluster, before: dict[str, Any]) -> None:
    failed(cl.gnt("debug", "delay", "abc"), 1, "Invalid duration 'abc'")
    # Refused by masterd's opcode validation, shown in Ganeti's format.
    failed(
        cl.gnt("debug", "delay", "--", "-1"),
        1,
        "Failure: prerequisites not met for this operation:\n"
        "error type: wrong_input, error details:\n",
        "'duration'",
    )
    assert cluster_state(cl) == before


# Jobs that do not exist or are finished
def test_unknown_job_id(cl: TestCluster, before: dict[str, Any]) -> None:
    # As Ganeti 3.0.2: "info" reports the missing job and succeeds.
    info = cl.gnt("job", "info", "999")
    assert info.rc == 0 and info.stdout.strip() == "- Job ID 999 not found"
    failed(cl.gnt("job", "watch", "999"), 1, "999", "not found")
    failed(cl.gnt("job", "wait", "999"), 1, "999", "not found")
    cancel = cl.gnt("job", "cancel", "999")
    assert cancel.rc == 1 and cancel.stdout.strip() == "Job 999 not found in queue"
    failed(cl.gnt("job", "archive", "999"), 1, "Failed to archive job with ID '999'")
    priority = cl.gnt("job", "change-priority", "--priority", "high", "999")
    assert priority.rc == 1 and "Job 999 not found" in priority.stdout
    failed(cl.gnt("job", "info", "nine"), 1, "Invalid job ID passed")
    with cl.client() as client:
        assert client.query_jobs([999], ["id", "status"]) == [[999, None]]
        with pytest.raises(errors.JobLost):
            client.wait_for_job_change(999, ["status"], None, 0, 1)
        assert client.call("ArchiveJob", 999) is False
    assert cluster_state(cl) == before


def test_cancel_of_a_finished_job(cl: TestCluster, before: dict[str, Any]) -> None:
    result = cl.gnt("job", "cancel", "1")
    assert result.rc == 1, result
    # As luxid: a finished job is no longer in the queue.
    assert result.stdout == "Job 1 not found in queue\n"
    with cl.client() as client:
        assert client.call("CancelJob", 1, False)[0] is False
        assert client.query_jobs([1], ["status"]) == [["success"]]
    assert cluster_state(cl) == before


# Cluster life cycle
def test_second_init_in_the_same_root(cl: TestCluster, before: dict[str, Any]) -> None:
    masterd = running_pid(cl.paths.pid_file("corral-masterd"))
    noded = running_pid(cl.paths.pid_file("corral-noded"))
    stderr = failed(cl.init(), 1, "already initialised")
    assert "error type: wrong_state" in stderr
    assert running_pid(cl.paths.pid_file("corral-masterd")) == masterd
    assert running_pid(cl.paths.pid_file("corral-noded")) == noded
    assert cluster_state(cl) == before


COMMANDS = [
    ("cluster", "info"),
    ("cluster", "verify"),
    ("cluster", "version"),
    ("cluster", "getmaster"),
    ("cluster", "queue", "info"),
    ("cluster", "list-tags"),
    ("cluster", "add-tags", "a"),
    ("cluster", "modify", "--max-running-jobs", "3"),
    ("cluster", "destroy", "--yes-do-it"),
    ("job", "list"),
    ("job", "info", "1"),
    ("job", "cancel", "1"),
    ("debug", "delay", "1"),
    ("debug", "locks"),
    ("debug", "test-jobqueue"),
]


def test_commands_in_a_root_without_cluster(tmp_path: Path) -> None:
    root = new_root(tmp_path)
    for command, *args in COMMANDS:
        result = root.gnt(command, *args)
        stderr = failed(result, C.EXIT_NOTCLUSTER, NOT_CLUSTER)
        assert len(stderr.strip().splitlines()) == 1, (command, args, stderr)
    assert list(root.paths.root.iterdir()) == []  # nothing was created


def test_destroy_without_confirmation(cl: TestCluster, before: dict[str, Any]) -> None:
    failed(cl.gnt("cluster", "destroy"), 1, "--yes-do-it")
    assert cl.paths.config_db.exists()
    assert running_pid(cl.paths.pid_file("corral-masterd")) is not None
    assert cluster_state(cl) == before


# Queries
def test_unknown_output_field(cl: TestCluster, before: dict[str, Any]) -> None:
    result = cl.gnt("job", "list", "-o", "id,nosuchfield")
    failed(result, C.EXIT_UNKNOWN_FIELD, "Warning: Queried for unknown fields nosuchfield")
    assert result.stdout.splitlines()[:2] == ["ID nosuchfield", " 1 ??"]
    fields = cl.gnt("job", "list-fields", "nosuchfield")
    assert fields.rc == C.EXIT_UNKNOWN_FIELD
    assert "Unknown field 'nosuchfield'" in fields.stdout
    assert cluster_state(cl) == before


@pytest.mark.parametrize(
    ("qfilter", "text"),
    [
        ("~ 1", "Failed to parse query filter '~ 1'"),
        ("nosuchfield == 1", "nosuchfield"),
        ("status ==", "Failed to parse query filter 'status =='"),
    ],
)
def test_bad_query_filter(cl: TestCluster, before: dict[str, Any], qfilter: str, text: str) -> None:
    stderr = failed(cl.gnt("job", "list", "-F", qfilter), 1, "Error while parsing query filter")
    assert text in stderr
    assert cluster_state(cl) == before


def test_bad_query_filter_over_luxi(cl: TestCluster, before: dict[str, Any]) -> None:
    with cl.client() as client:
        with pytest.raises(errors.QueryFilterParseError):
            client.query(C.QR_JOB, ["id"], ["~", 1])
        with pytest.raises(errors.OpPrereqError):
            client.query("no-such-resource", ["id"])
    assert cluster_state(cl) == before


# Operations refused inside a job: the job fails, the config stays
def test_invalid_mac_prefix(cl: TestCluster, before: dict[str, Any]) -> None:
    stderr = failed(
        cl.gnt("cluster", "modify", "--mac-prefix", "zz"),
        1,
        "Failure: prerequisites not met for this operation:",
        "error type: wrong_input",
        "Invalid MAC address prefix 'zz'",
    )
    assert len(stderr.strip().splitlines()) == 3
    after = cluster_state(cl)
    assert (after["serial"], after["info"]) == (before["serial"], before["info"])
    (job_id,) = new_jobs(cl, before)
    with cl.client() as client:
        ((status, result),) = wait_final(client, [job_id], ("status", "opresult"))
    assert status == "error" and result[0][0] == "OpPrereqError"


@pytest.mark.parametrize(
    ("tag", "text"),
    [
        ("bad tag", "Tag contains invalid characters"),
        ("semi;colon", "Tag contains invalid characters"),
        ("x" * 129, "Tag too long (>128 characters)"),
    ],
)
def test_invalid_tags(cl: TestCluster, before: dict[str, Any], tag: str, text: str) -> None:
    failed(
        cl.gnt("cluster", "add-tags", "good-tag", tag), 1, "Failure: invalid tag(s) given:", text
    )
    after = cluster_state(cl)
    assert (after["serial"], after["info"]) == (before["serial"], before["info"])
    assert after["info"]["tags"] == []
    (job_id,) = new_jobs(cl, before)
    with cl.client() as client:
        ((status, result),) = wait_final(client, [job_id], ("status", "opresult"))
    assert status == "error" and result[0][0] == "TagError"


def test_removing_a_missing_tag(cl: TestCluster, before: dict[str, Any]) -> None:
    failed(
        cl.gnt("cluster", "remove-tags", "never-added"),
        1,
        "error type: unknown_entity",
        "'never-added' not found",
    )
    failed(cl.gnt("cluster", "add-tags"), 1, "No tags to be added")
    after = cluster_state(cl)
    assert (after["serial"], after["info"]) == (before["serial"], before["info"])


def test_drained_queue_refuses_jobs_until_undrained(
    cl: TestCluster, before: dict[str, Any]
) -> None:
    assert cl.gnt("cluster", "queue", "drain").rc == 0
    try:
        assert cl.gnt("cluster", "queue", "info").stdout == "The drain flag is set\n"
        failed(
            cl.gnt("debug", "delay", "0"),
            1,
            "Failure: the job queue is marked for drain and doesn't accept new requests",
        )
        with cl.client() as client:
            with pytest.raises(errors.JobQueueDrainError):
                client.submit_many_jobs([[{"OP_ID": "OP_TEST_DELAY", "duration": 0}]])
            assert client.call("QueryConfigValues", ["drain_flag"]) == [True]
        assert cluster_state(cl)["jobs"] == before["jobs"]
        assert_serving(cl)
    finally:
        assert cl.gnt("cluster", "queue", "undrain").rc == 0
    assert cl.gnt("cluster", "queue", "info").stdout == "The drain flag is unset\n"
    accepted = cl.gnt("debug", "delay", "0")
    assert accepted.rc == 0, accepted.stderr
    assert len(new_jobs(cl, before)) == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["instance", "change-group", "inst1.example.com"],
        ["cluster", "upgrade", "--to", "3.0"],
        ["debug", "allocator", "--mode", "relocate", "x"],
    ],
)
def test_ganeti_commands_not_built_say_so(
    cl: TestCluster, before: dict[str, Any], argv: list[str]
) -> None:
    name = f"gnt-{argv[0]} {argv[1]}"
    failed(cl.gnt(*argv), 1, f"Failure: '{name}' is not built in Corral yet\n")
    assert cluster_state(cl) == before


def test_replace_disks_needs_one_mode(cl: TestCluster, before: dict[str, Any]) -> None:
    result = cl.gnt("instance", "replace-disks", "-s", "-p", "inst1.example.com")
    assert result.rc == 1, result
    assert "One and only one of the -p, -s, -a, -n and -I options must be passed" in result.stderr
    assert cluster_state(cl) == before


@pytest.mark.parametrize("command", ["master-failover", "masterfailover"])
def test_master_failover_on_the_master_says_where_to_run_it(
    cl: TestCluster, before: dict[str, Any], command: str
) -> None:
    result = cl.gnt("cluster", command)
    assert result.rc == 1, result
    assert (
        "This commands must be run on the node where you want the new master to be."
        f" {cl.node_name} is already the master"
    ) in result.stderr
    assert cluster_state(cl) == before
