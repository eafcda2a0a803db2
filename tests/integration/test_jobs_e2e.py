"""The job commands end to end, through the real daemons: listing, info,
watch, submit, cancel, priorities, archive, locks and dependencies."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from corral import constants as C
from corral import errors
from tests.helpers.cluster import Result, TestCluster, running_cluster
from tests.helpers.jobs import wait_final, wait_status

CTIME = r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}"
TIMESTAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}"


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("jobs")) as cluster:
        yield cluster


def ok(result: Result) -> Result:
    assert result.rc == 0, (result.rc, result.stdout, result.stderr)
    return result


def submitted(result: Result) -> int:
    """The job id a ``--submit`` command reported."""
    ok(result)
    match = re.fullmatch(r"JobID: (\d+)\n", result.stderr)
    assert match, result.stderr
    return int(match.group(1))


def delay_op(duration: float, **extra: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_TEST_DELAY", "duration": duration, **extra}


def limited(cl: TestCluster, limit: int) -> None:
    ok(cl.gnt("cluster", "modify", "--max-running-jobs", str(limit)))


def test_list_columns_alignment_and_options(cl: TestCluster) -> None:
    with cl.client() as client:
        results = client.submit_many_jobs([[delay_op(0)] for _ in range(10)])
        ids = [job_id for _, job_id in results]
        wait_final(client, ids)
        rows = client.query_jobs(None, ["id", "status", "summary"])
    assert len(rows) >= 11 and rows[-1][0] == ids[-1]
    width = len(str(rows[-1][0]))
    status_width = max(len("Status"), *(len(r[1]) for r in rows))

    lines = ok(cl.gnt("job", "list")).stdout.splitlines()
    assert lines[0].rstrip() == f"{'ID':>{width}} {'Status':<{status_width}} Summary"
    expected = [
        f"{job_id:>{width}} {status:<{status_width}} {','.join(summary)}"
        for job_id, status, summary in rows
    ]
    assert [line.rstrip() for line in lines[1:]] == expected
    assert lines[1].startswith(" " * (width - 1) + "1 success CLUSTER_POST_INIT")

    bare = ok(cl.gnt("job", "list", "--no-headers")).stdout.splitlines()
    assert [line.split() for line in bare] == [
        [str(i), s, ",".join(summary)] for i, s, summary in rows
    ]
    separated = ok(cl.gnt("job", "list", "--separator=|")).stdout.splitlines()
    assert separated[0] == "ID|Status|Summary"
    assert separated[1:] == [f"{i}|{s}|{','.join(summary)}" for i, s, summary in rows]
    assert separated[-1] == f"{ids[-1]}|success|TEST_DELAY(0.0)"

    plus = ok(cl.gnt("job", "list", "-o", "+priority", str(ids[0]))).stdout.splitlines()
    assert [line.split() for line in plus] == [
        ["ID", "Status", "Summary", "Priority"],
        [str(ids[0]), "success", "TEST_DELAY(0.0)", "0"],
    ]
    # Numbers are right-aligned under their header.
    assert plus[1].endswith(" " * (len("Priority") - 1) + "0")
    only = ok(cl.gnt("job", "list", "--no-headers", "-o", "id,status", str(ids[1])))
    assert only.stdout == f"{ids[1]} success\n"
    fields = ok(cl.gnt("job", "list-fields", "id", "status")).stdout.splitlines()
    assert [line.split()[:3] for line in fields] == [
        ["Name", "Type", "Title"],
        ["id", "Number", "ID"],
        ["status", "Text", "Status"],
    ]


def test_submit_info_and_watch(cl: TestCluster) -> None:
    job_id = submitted(cl.gnt("debug", "delay", "--repeat", "2", "--submit", "0.2"))
    printed = ok(cl.gnt("debug", "delay", "--submit", "--print-jobid", "0"))
    assert printed.stdout == f"{job_id + 1}\n" and printed.stderr == f"JobID: {job_id + 1}\n"

    watch = ok(cl.gnt("job", "watch", str(job_id)))
    header = f"Output from job {job_id} follows"
    lines = watch.stdout.splitlines()
    assert lines[:2] == [header, "-" * len(header)]
    assert len(lines) == 4, lines
    for index, line in enumerate(lines[2:]):
        assert re.fullmatch(f"{CTIME}  - INFO: Test delay iteration {index}/1", line), line
    # The job is finished: watching it again prints its whole log at once.
    assert ok(cl.gnt("job", "watch", str(job_id))).stdout == watch.stdout
    assert ok(cl.gnt("job", "wait", str(job_id))).stdout == ""

    info = ok(cl.gnt("job", "info", str(job_id))).stdout.splitlines()
    patterns = [
        f"- Job ID: {job_id}",
        "  Status: success",
        f"  Received:         {TIMESTAMP}",
        rf"  Processing start: {TIMESTAMP} \(delta \d+\.\d{{6}}s\)",
        rf"  Processing end:   {TIMESTAMP} \(delta \d+\.\d{{6}}s\)",
        r"  Total processing time: \d+\.\d{6} seconds",
        "  Opcodes: ",
        "    - Opcode: OP_TEST_DELAY",
        "      Status: success",
        f"      Processing start: {TIMESTAMP}",
        f"      Execution start:  {TIMESTAMP}",
        f"      Processing end:   {TIMESTAMP}",
        "      Input fields: ",
        "        OP_ID: OP_TEST_DELAY",
    ]
    for pattern, line in zip(patterns, info, strict=False):
        assert re.fullmatch(pattern, line), (pattern, line)
    body = info[len(patterns) :]
    assert "        duration: 0.2" in body and "        repeat: 2" in body
    tail = body[body.index("      Result: None") :]
    assert tail[0:1] == ["      Result: None"]
    assert tail[1] == "      Execution log: "
    assert re.fullmatch(f"        - Time: {TIMESTAMP}", tail[2])
    assert tail[3] == "          Content: [1, message,  - INFO: Test delay iteration 0/1]"
    assert tail[5] == "          Content: [2, message,  - INFO: Test delay iteration 1/1]"
    total = float(info[5].split()[3])
    assert total >= 0.4  # two iterations of 0.2 s


def test_cancel_queued_job_and_change_priority(cl: TestCluster) -> None:
    limited(cl, 1)
    try:
        running = submitted(cl.gnt("debug", "delay", "--submit", "1"))
        low = submitted(cl.gnt("debug", "delay", "--submit", "0"))
        doomed = submitted(cl.gnt("debug", "delay", "--submit", "0"))
        urgent = submitted(cl.gnt("debug", "delay", "--submit", "0"))
        with cl.client() as client:
            wait_status(client, running, {C.JOB_STATUS_RUNNING})
            queued = client.query_jobs([low, doomed, urgent], ["status"])
            assert queued == [["queued"]] * 3

            cancel = ok(cl.gnt("job", "cancel", str(doomed)))
            assert cancel.stdout == f"Dequeued job {doomed}\n"
            ((status, opstatus),) = wait_final(client, [doomed], ("status", "opstatus"))
            assert (status, opstatus) == ("canceled", ["canceled"])
            # A running job is no longer waiting: it is not canceled without --kill.
            refused = cl.gnt("job", "cancel", str(running))
            assert refused.rc == 1 and "no longer waiting" in refused.stdout

            changed = ok(cl.gnt("job", "change-priority", "--priority", "high", str(urgent)))
            assert changed.stdout == (
                f"Priorities of pending opcodes for job {urgent} have been changed to -10\n"
            )
            assert client.query_jobs([urgent], ["priority", "oppriority"]) == [[-10, [-10]]]
            rows = wait_final(client, [running, low, urgent], ("status", "start_ts"))
        assert [row[0] for row in rows] == ["success"] * 3
        # The job made urgent ran before the one queued ahead of it.
        assert rows[2][1] < rows[1][1]
        listing = ok(cl.gnt("job", "list", "--no-headers", str(doomed))).stdout
        assert listing.split() == [str(doomed), "canceled", "TEST_DELAY(0.0)"]
        # Canceled before it started: an end but no start, so no delta.
        info = ok(cl.gnt("job", "info", str(doomed))).stdout.splitlines()
        assert info[1] == "  Status: canceled"
        assert info[3] == "  Processing start: unknown (None)"
        assert re.fullmatch(f"  Processing end:   {TIMESTAMP}", info[4]), info[4]
        assert re.fullmatch(r"  Total processing time: \d+\.\d{6} seconds", info[5])
        finished = cl.gnt("job", "change-priority", "--priority", "low", str(low))
        assert finished.rc == 1 and f"Job {low}" in finished.stdout
    finally:
        limited(cl, 20)


def test_locks_show_owners_and_waiters(cl: TestCluster) -> None:
    holder = submitted(cl.gnt("debug", "delay", "--submit", "1"))
    node = "node/" + ok(cl.gnt("node", "list", "--no-headers", "-o", "uuid")).stdout.strip()
    with cl.client() as client:
        wait_status(client, holder, {C.JOB_STATUS_RUNNING})
        waiter = submitted(cl.gnt("cluster", "add-tags", "--submit", "locked-out"))
        wait_status(client, waiter, {C.JOB_STATUS_WAITING})
        locks = ok(cl.gnt("debug", "locks")).stdout.splitlines()
        assert locks[0].split() == ["Name", "Mode", "Owner", "Pending"]
        assert [line.split() for line in locks[1:]] == [
            ["cluster/BGL", "shared", str(holder), f"exclusive:{waiter}"],
            [node, "exclusive", str(holder), "-"],  # the master's, a delay's on_master
        ]
        terse = ok(cl.gnt("debug", "locks", "--no-headers", "--separator=|", "-o", "name,owner"))
        assert terse.stdout == f"cluster/BGL|{holder}\n{node}|{holder}\n"
        assert wait_final(client, [holder, waiter]) == [["success"], ["success"]]
        assert client.call("QueryTags", "cluster", "") == ["locked-out"]
    after = ok(cl.gnt("debug", "locks", "--no-headers")).stdout
    assert str(holder) not in after and str(waiter) not in after
    ok(cl.gnt("cluster", "remove-tags", "locked-out"))


def test_test_jobqueue(cl: TestCluster) -> None:
    result = ok(cl.gnt("debug", "test-jobqueue"))
    lines = result.stdout.splitlines()
    assert lines[0] == "Testing job submission"
    assert "Job dependency tests were successful" in lines
    assert lines[-1] == "Job queue test successful"


def test_dependencies_with_relative_ids(cl: TestCluster) -> None:
    jq_fail = {"OP_ID": "OP_TEST_JQUEUE", "fail": True}
    jobs = [
        [delay_op(0.3)],
        [delay_op(0, depends=[[-1, ["success"]]])],
        [delay_op(0, depends=[[-2, ["error", "canceled"]]])],
        [jq_fail],
        [delay_op(0, depends=[[-1, ["error"]]])],
        [delay_op(0, depends=[[-5, []]])],
    ]
    with cl.client() as client:
        results = client.submit_many_jobs(jobs)
        assert all(ok_ for ok_, _ in results), results
        ids = [job_id for _, job_id in results]
        assert ids == list(range(ids[0], ids[0] + 6))
        rows = wait_final(client, ids, ("status", "ops", "start_ts", "end_ts", "opresult"))
    status = [row[0] for row in rows]
    assert status == ["success", "success", "error", "error", "success", "success"]
    # Relative ids were made absolute at submission.
    assert rows[1][1][0]["depends"] == [[ids[0], ["success"]]]
    assert rows[5][1][0]["depends"] == [[ids[0], []]]
    # The dependants started only after the first job had ended.
    for index in (1, 2, 5):
        assert rows[index][2] >= rows[0][3], index
    assert rows[2][4][0][0] == "OpExecError"
    assert f"Dependency job {ids[0]}" in rows[2][4][0][1][0]
    # A relative id that points outside the submission is refused.
    with cl.client() as client, pytest.raises(errors.OpPrereqError) as info:
        client.submit_many_jobs([[delay_op(0, depends=[[-1, []]])]])
    assert "Relative job dependency -1" in info.value.message


def test_archive_and_autoarchive(cl: TestCluster) -> None:
    job_id = submitted(cl.gnt("debug", "delay", "--submit", "0"))
    # Running until it is killed below: the refusal must not race its end.
    busy = submitted(cl.gnt("debug", "delay", "--submit", "600"))
    with cl.client() as client:
        wait_final(client, [job_id])
        wait_status(client, busy, {C.JOB_STATUS_RUNNING})
    ok(cl.gnt("job", "archive", str(job_id)))
    live = ok(cl.gnt("job", "list", "--no-headers", "-o", "id")).stdout.split()
    assert str(job_id) not in live
    archived = ok(cl.gnt("job", "list", "--archived", "--no-headers", "-o", "id,archived"))
    assert [str(job_id), "Y"] in [line.split() for line in archived.stdout.splitlines()]
    # An archived job can still be looked at.
    assert ok(cl.gnt("job", "info", str(job_id))).stdout.startswith(f"- Job ID: {job_id}\n")
    # Unfinished jobs are not archived.
    refused = cl.gnt("job", "archive", str(busy))
    assert refused.rc == 1 and f"Failed to archive job with ID '{busy}'" in refused.stderr

    ok(cl.gnt("job", "cancel", "--kill", "--yes-do-it", str(busy)))
    with cl.client() as client:
        wait_final(client, [busy])
        finished = len(client.query_jobs(None, ["id"]))
    auto = ok(cl.gnt("job", "autoarchive", "all"))
    assert auto.stdout == f"Archived {finished} jobs, 0 unchecked left\n"
    assert ok(cl.gnt("job", "list", "--no-headers")).stdout == ""
    everything = ok(cl.gnt("job", "list", "--archived", "--no-headers")).stdout.splitlines()
    assert len(everything) >= finished + 1
    assert all(line.split()[-1] == "Y" for line in everything)
    assert ok(cl.gnt("job", "autoarchive", "1d")).stdout == "Archived 0 jobs, 0 unchecked left\n"
    bad = cl.gnt("job", "autoarchive", "soon")
    assert bad.rc == 1 and "Invalid time specification 'soon'" in bad.stderr
