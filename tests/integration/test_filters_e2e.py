"""Job filter rules through the real daemons: gnt-filter's commands, the
scheduler holding, rejecting and rate-limiting jobs, and rules surviving a
restart of masterd.

A job held back by a rule is recognised without waiting: the scheduler
decides when the job is submitted, and a job it starts has a start time as
soon as masterd answers the next request; a held one has none.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from corral import constants as C
from corral.luxi.client import Client
from corral.nicesort import nice_key
from corral.process.daemons import start_daemon, stop_daemon
from tests.helpers.cluster import Result, TestCluster, running_cluster
from tests.helpers.jobs import wait_final, wait_status

FIELDS = ["uuid", "watermark", "priority", "predicates", "action", "reason_trail"]
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
IS_DELAY = ["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]


@pytest.fixture(scope="module")
def cl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("filters")) as cluster:
        yield cluster


@pytest.fixture
def client(cl: TestCluster) -> Iterator[Client]:
    """A luxi client; every test must leave no rule behind."""
    with cl.client() as luxi:
        yield luxi
        left = luxi.call("QueryFilters", None, ["uuid"])
        for (uuid,) in left:  # so that one failure does not spoil the next tests
            luxi.call("DeleteFilter", uuid)
        assert left == []


def ok(result: Result) -> Result:
    assert result.rc == 0, (result.rc, result.stdout, result.stderr)
    return result


def add_rule(client: Client, action: Any, *predicates: Any, priority: int = 0) -> str:
    uuid = client.call("ReplaceFilter", None, priority, list(predicates), action, [])
    assert UUID.fullmatch(uuid)
    return str(uuid)


def reasoned(reason: str, duration: float = 0) -> dict[str, Any]:
    """A delay with a reason; not on the master, so it locks no node (these
    tests are about the scheduler, not locks)."""
    return {
        "OP_ID": "OP_TEST_DELAY",
        "duration": duration,
        "on_master": False,
        "reason": [["test", reason, 1]],
    }


def held(client: Client, job_id: int) -> bool:
    """Whether the job is queued and was never started (see the module's doc)."""
    return bool(client.query_jobs([job_id], ["status", "start_ts"]) == [["queued", None]])


def serial(client: Client) -> int:
    return int(client.call("QueryConfigValues", ["config_serial"])[0])


# The commands


def test_add_list_and_info(cl: TestCluster, client: Client) -> None:
    before = serial(client)
    added = ok(
        cl.gnt(
            "filter",
            "add",
            "--priority",
            "5",
            "--predicates",
            '[["jobid", ["=", "id", 3]], ["reason", ["!=", "source", "x"]]]',
            "--action",
            "RATE_LIMIT 2",
            "--reason",
            "for the test",
        )
    )
    uuid = added.stdout.strip()
    assert UUID.fullmatch(uuid) and added.stdout == uuid + "\n"
    assert serial(client) == before + 1
    ((_, watermark, priority, predicates, action, trail),) = client.call(
        "QueryFilters", [uuid], FIELDS
    )
    last_job = client.query_jobs(None, ["id"])[-1][0]
    assert (watermark, priority, action) == (last_job, 5, ["RATE_LIMIT", 2])
    # Stored as luxid stores them: "=" is "==", "!=" is a negated "==".
    assert predicates == [["jobid", ["==", "id", 3]], ["reason", ["!", ["==", "source", "x"]]]]
    assert [entry[:2] for entry in trail] == [["gnt:user", "for the test"], ["luxid", ""]]
    assert trail[1][2] % 1000 == 0 and trail[1][2] >= trail[0][2] // 1000 * 1000

    row = [uuid, str(watermark), "5", str(predicates), str(action), str(trail)]
    listing = ok(cl.gnt("filter", "list", "--separator=|")).stdout
    assert (
        listing == "UUID|Watermark|Priority|Predicates|Action|ReasonTrail\n" + "|".join(row) + "\n"
    )
    info = ok(cl.gnt("filter", "info", uuid)).stdout
    assert info == (
        f"UUID: {uuid}\n  Watermark: {watermark}\n  Priority: 5\n  Predicates: {predicates}\n"
        f"  Action: ['RATE_LIMIT', 2]\n  Reason trail: {trail}\n"
    )
    client.call("DeleteFilter", uuid)


def test_replace_and_delete(cl: TestCluster, client: Client) -> None:
    uuid = add_rule(client, ["RATE_LIMIT", 2], ["jobid", None], priority=5)
    before = serial(client)
    replaced = ok(cl.gnt("filter", "replace", "--action", "PAUSE", uuid))
    assert replaced.stdout == uuid + "\n"
    ((_, _, priority, predicates, action, trail),) = client.call("QueryFilters", [uuid], FIELDS)
    # Every part is replaced, with the defaults where no option was given.
    assert (priority, predicates, action, [e[0] for e in trail]) == (0, [], "PAUSE", ["luxid"])

    # An unknown uuid given to replace makes a rule with that uuid.
    other = "0badc0de-0000-4000-8000-000000000001"
    assert ok(cl.gnt("filter", "replace", other)).stdout == other + "\n"
    # Listed in Ganeti's "nice" order of the uuids (digit runs as numbers).
    in_order = sorted([other, uuid], key=nice_key)
    listed = ok(cl.gnt("filter", "list", "--no-headers", "-o", "uuid")).stdout
    assert listed == "".join(f"{rule}\n" for rule in in_order)
    chosen = ok(cl.gnt("filter", "list", "--no-headers", "-o", "uuid,action", "0badc0de-*"))
    assert chosen.stdout == f"{other} CONTINUE\n"
    by_filter = ok(cl.gnt("filter", "list", "--no-headers", "-o", "uuid", 'action == "PAUSE"'))
    assert by_filter.stdout == f"{uuid}\n"
    assert ok(cl.gnt("filter", "info", "0badc0de-0000-4000-8000-00000000ffff")).stdout == ""

    for rule in (uuid, other):
        assert ok(cl.gnt("filter", "delete", rule)).stdout == ""
    assert ok(cl.gnt("filter", "list")).stdout == (
        "UUID Watermark Priority Predicates Action ReasonTrail\n"
    )
    assert serial(client) == before + 4


def test_list_fields_and_query(cl: TestCluster, client: Client) -> None:
    fields = ok(cl.gnt("filter", "list-fields", "--separator=|")).stdout.splitlines()
    assert fields == [
        "Name|Type|Title|Description",
        "action|Custom|Action|Filter action",
        "predicates|Custom|Predicates|List of filter predicates",
        "priority|Custom|Priority|Filter priority",
        "reason_trail|Custom|ReasonTrail|Reason why this filter was added",
        "uuid|Custom|UUID|Filter ID",
        "watermark|Custom|Watermark|Highest job ID used at the time when the filter was added",
    ]
    unknown = cl.gnt("filter", "list", "-o", "uuid,colour")
    assert unknown.rc == C.EXIT_UNKNOWN_FIELD
    assert unknown.stderr == "Warning: Queried for unknown fields colour\n"
    first = add_rule(client, "CONTINUE", priority=3)
    second = add_rule(client, "ACCEPT", priority=4)
    result = client.query(C.QR_FILTER, ["uuid", "priority"], [">", "priority", 3])
    assert result["data"] == [[[C.RS_NORMAL, second], [C.RS_NORMAL, 4]]]
    assert [d["kind"] for d in result["fields"]] == [C.QFT_OTHER, C.QFT_OTHER]
    for uuid in (first, second):
        client.call("DeleteFilter", uuid)


# The scheduler


def test_pause_holds_new_jobs_and_spares_older_ones(client: Client) -> None:
    by_reason = add_rule(client, "PAUSE", ["reason", ["=", "reason", "hold me"]])
    old = client.submit_job([reasoned("hold me")])
    assert held(client, old)
    # Soft drain: hold every job newer than the rule.
    drain = add_rule(client, "PAUSE", ["jobid", [">", "id", "watermark"]], priority=1)
    probes = add_rule(client, "ACCEPT", ["reason", ["=", "reason", "probe"]], priority=0)
    new = client.submit_job([reasoned("any")])
    probe = client.submit_job([reasoned("probe")])
    assert wait_final(client, [probe]) == [["success"]]
    assert held(client, new) and held(client, old)
    client.call("DeleteFilter", by_reason)
    # The older job is not caught by the drain: it runs now.
    assert wait_final(client, [old]) == [["success"]]
    assert held(client, new)
    client.call("DeleteFilter", drain)
    assert wait_final(client, [new]) == [["success"]]
    client.call("DeleteFilter", probes)


def test_reject_cancels_queued_jobs_and_new_ones(cl: TestCluster, client: Client) -> None:
    pause = add_rule(client, "PAUSE", IS_DELAY, priority=1)
    queued = client.submit_job([reasoned("a")])
    assert held(client, queued)
    reject = add_rule(client, "REJECT", IS_DELAY, priority=0)
    # Re-filtered as the rule is added: the queued job is canceled.
    assert client.query_jobs([queued], ["status", "opstatus", "opresult"]) == [
        ["canceled", ["canceled"], [None]]
    ]
    new = client.submit_job([reasoned("b")])
    status, opstatus, start, end = client.query_jobs(
        [new], ["status", "opstatus", "start_ts", "end_ts"]
    )[0]
    assert (status, opstatus, start) == ("canceled", ["canceled"], None) and end is not None
    other = client.submit_job([{"OP_ID": "OP_TEST_JQUEUE"}])
    assert wait_final(client, [other]) == [["success"]]
    waited = cl.gnt("debug", "delay", "0")
    assert waited.rc == 1 and "canceled" in waited.stderr, waited.stderr
    for uuid in (pause, reject):
        client.call("DeleteFilter", uuid)


def test_rate_limit_with_running_jobs(client: Client) -> None:
    long = client.submit_job([reasoned("limited", duration=60)])
    wait_status(client, long, {C.JOB_STATUS_RUNNING})
    # The rule counts the job that was running before it was added.
    limit = add_rule(client, ["RATE_LIMIT", 1], ["reason", ["=", "reason", "limited"]])
    waiting = client.submit_job([reasoned("limited")])
    free = client.submit_job([reasoned("free")])
    assert wait_final(client, [free]) == [["success"]]
    assert held(client, waiting)
    assert client.call("CancelJob", long, True)[0] is True
    assert wait_final(client, [long, waiting]) == [["canceled"], ["success"]]
    client.call("DeleteFilter", limit)


def test_rules_survive_a_restart_of_masterd(cl: TestCluster) -> None:
    with cl.client() as client:
        pause = add_rule(client, "PAUSE", ["reason", ["=", "reason", "after restart"]])
        job_id = client.submit_job([reasoned("after restart")])
    listing = ok(cl.gnt("filter", "list")).stdout
    stop_daemon(cl.paths, "corral-masterd")
    start_daemon([sys.executable, "-m", "corral.daemons.masterd"], cl.env, timeout=30)
    assert ok(cl.gnt("filter", "list")).stdout == listing
    with cl.client() as fresh:
        probe = fresh.submit_job([reasoned("probe")])
        assert wait_final(fresh, [probe]) == [["success"]]
        assert held(fresh, job_id)
        fresh.call("DeleteFilter", pause)
        assert wait_final(fresh, [job_id]) == [["success"]]
        assert fresh.call("QueryFilters", None, ["uuid"]) == []
