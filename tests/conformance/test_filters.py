"""Ganeti 3.0.2's gnt-filter and luxi client against a Corral cluster.

Every command runs twice on the same rules, once as Ganeti's ``gnt-filter``
and once as Corral's; the two outputs (exit code, standard output and error)
must be the same bytes.  Rules made by one tool are listed, shown, replaced
and deleted by the other.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from corral import errors
from tests.conformance.ganeti import run_ganeti, run_ganeti_python
from tests.helpers.cluster import Result, TestCluster
from tests.helpers.jobs import delay_gate_path, release_gate, wait_final

FIELDS = ["uuid", "watermark", "priority", "predicates", "action", "reason_trail"]
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\n")
PREDICATES = '[["jobid", [">", "id", "watermark"]], ["opcode", ["!=", "OP_ID", "OP_TEST_DELAY"]]]'
RULE_OPTIONS = ["--priority", "7", "--predicates", PREDICATES, "--action", "RATE_LIMIT 3"]


def ganeti(cl: TestCluster, *argv: str) -> Result:
    return run_ganeti(cl.paths.root, ["gnt-filter", *argv])


def same(cl: TestCluster, *argv: str) -> Result:
    """Run ``gnt-filter argv`` as Ganeti's and as Corral's: the same output."""
    theirs = ganeti(cl, *argv)
    ours = cl.gnt("filter", *argv)
    assert (ours.rc, ours.stdout, ours.stderr) == (theirs.rc, theirs.stdout, theirs.stderr)
    return ours


def rules(cl: TestCluster) -> list[list[Any]]:
    with cl.client() as client:
        return list(client.call("QueryFilters", None, FIELDS))


def snapshot(cl: TestCluster) -> dict[str, Any]:
    """The rules and the configuration serial: what a refused command must not change."""
    with cl.client() as client:
        serial = client.call("QueryConfigValues", ["config_serial"])[0]
    return {"rules": rules(cl), "serial": serial}


@pytest.fixture
def two_rules(gcluster: TestCluster) -> Iterator[tuple[str, str]]:
    """One rule added by each gnt-filter, with the same options; both removed after."""
    theirs = ganeti(gcluster, "add", *RULE_OPTIONS, "--reason", "pink bunny")
    ours = gcluster.gnt("filter", "add", *RULE_OPTIONS, "--reason", "pink bunny")
    for added in (theirs, ours):
        assert (added.rc, added.stderr) == (0, "") and UUID.fullmatch(added.stdout), added
    yield theirs.stdout.strip(), ours.stdout.strip()
    with gcluster.client() as client:
        for (uuid,) in client.call("QueryFilters", None, ["uuid"]):
            client.call("DeleteFilter", uuid)


def test_add_stores_the_same_rule(gcluster: TestCluster, two_rules: tuple[str, str]) -> None:
    stored = {row[0]: row for row in rules(gcluster)}
    theirs, ours = stored[two_rules[0]], stored[two_rules[1]]
    # The same rule but for the uuid and the reason trail's times.
    assert theirs[1:5] == ours[1:5]
    assert theirs[3] == [
        ["jobid", [">", "id", "watermark"]],
        ["opcode", ["!", ["==", "OP_ID", "OP_TEST_DELAY"]]],
    ]
    assert [entry[:2] for entry in theirs[5]] == [entry[:2] for entry in ours[5]]
    assert [entry[:2] for entry in ours[5]] == [["gnt:user", "pink bunny"], ["luxid", ""]]


@pytest.mark.parametrize(
    "argv",
    [
        ["list"],
        ["list", "--no-headers"],
        ["list", "--separator=|"],
        ["list", "-o", "uuid,action,priority"],
        ["list", "-o", "+watermark", "--no-headers", "--separator", ","],
        ["list", "-v", "-o", "uuid,colour"],
        ["list", "-o", "priority", "00000000-0000-4000-8000-000000000000"],
        ["info"],
        ["info", "00000000-0000-4000-8000-000000000000"],
        ["list-fields"],
        ["list-fields", "--no-headers", "--separator=|"],
        ["list-fields", "uuid", "colour", "action"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_listings(gcluster: TestCluster, two_rules: tuple[str, str], argv: list[str]) -> None:
    result = same(gcluster, *argv)
    assert result.rc == (14 if "colour" in " ".join(argv) else 0)
    if argv[-1].startswith("00000000-"):  # no such rule: no row, no error
        assert result.stdout in ("", "Priority\n")
    else:
        assert all(uuid in result.stdout for uuid in two_rules) or argv[0] == "list-fields"


def test_listings_of_chosen_rules(gcluster: TestCluster, two_rules: tuple[str, str]) -> None:
    theirs, ours = two_rules
    assert same(gcluster, "info", ours, theirs).stdout.count("UUID: ") == 2
    assert same(gcluster, "list", "--no-headers", "-o", "uuid", theirs).stdout == theirs + "\n"
    same(gcluster, "list", "-o", "uuid,priority", ours[:4] + "*")
    same(gcluster, "list", "-o", "uuid", f'uuid == "{ours}"')


def test_replace_and_delete(gcluster: TestCluster, two_rules: tuple[str, str]) -> None:
    theirs, ours = two_rules
    # Each tool replaces the other's rule.
    by_ganeti = ganeti(gcluster, "replace", "--action", "PAUSE", "--priority", "2", ours)
    by_corral = gcluster.gnt("filter", "replace", "--action", "PAUSE", "--priority", "2", theirs)
    assert (by_ganeti.rc, by_ganeti.stdout, by_ganeti.stderr) == (0, ours + "\n", "")
    assert (by_corral.rc, by_corral.stdout, by_corral.stderr) == (0, theirs + "\n", "")
    stored = {row[0]: row[1:5] for row in rules(gcluster)}
    assert stored[theirs] == stored[ours] and stored[ours][1:] == [2, [], "PAUSE"]
    same(gcluster, "list", "-o", "uuid,priority,predicates,action")
    # A uuid not known yet makes a new rule.
    new = ["0badc0de-0000-4000-8000-00000000000" + str(i) for i in (1, 2)]
    assert ganeti(gcluster, "replace", new[0]).stdout == new[0] + "\n"
    assert gcluster.gnt("filter", "replace", new[1]).stdout == new[1] + "\n"
    same(gcluster, "list", "-o", "uuid,priority,predicates,action", "0badc0de-*")
    deleted_by_ganeti = ganeti(gcluster, "delete", ours)
    deleted_by_corral = gcluster.gnt("filter", "delete", theirs)
    for deleted in (deleted_by_ganeti, deleted_by_corral):
        assert (deleted.rc, deleted.stdout, deleted.stderr) == (0, "", "")
    assert sorted(row[0] for row in rules(gcluster)) == sorted(new)


BAD = [
    ["delete", "00000000-0000-4000-8000-000000000000"],
    ["replace", "rule-one"],
    ["replace", "5F1F9D2E-3C44-4F4C-9A0E-6F0D8A1B2C3D"],
    ["add", "--action", "DROP"],
    ["add", "--action", "RATE_LIMIT 0"],
    ["add", "--action", "RATE_LIMIT x"],
    ["add", "--priority", "-1"],
    ["add", "--predicates", '[["jobid"]]'],
    ["add", "--predicates", '[["jobid", ["<", "id", 2.5]]]'],
    ["add", "--predicates", '[["opcode", ["=~", "OP_ID"]]]'],
    ["add", "--predicates", '[["reason", ["~", "source", "x"]]]'],
    ["add", "--predicates", '{"jobid": null}'],
    ["add", "--predicates", '[["jobid", ["=", "id", true]]]'],
    ["delete"],
    ["replace"],
    ["add", "5f1f9d2e-3c44-4f4c-9a0e-6f0d8a1b2c3d"],
]


@pytest.mark.parametrize("argv", BAD, ids=lambda argv: " ".join(argv))
def test_bad_input(gcluster: TestCluster, argv: list[str]) -> None:
    before = snapshot(gcluster)
    result = same(gcluster, *argv)
    assert result.rc == 1 and result.stdout == ""
    assert snapshot(gcluster) == before


LUXI_CALLS = """
import json
cl = luxi.Client()
def attempt(call, *args):
    try:
        return ["ok", call(*args)]
    except Exception as err:
        return [type(err).__name__, [str(arg) for arg in err.args]]
fields = %(fields)r
uuid = cl.ReplaceFilter(None, 4, [["reason", ["=", "reason", "x"]]], ["RATE_LIMIT", 5], [])
out = {
    "uuid": uuid,
    "query_filters": cl.QueryFilters([uuid], fields),
    "query": cl.Query("filter", fields, ["==", "uuid", uuid]).ToDict(),
    "query_fields": cl.QueryFields("filter", None).ToDict(),
    "unknown_field": attempt(cl.QueryFilters, None, ["uuid", "colour"]),
    "replace_bad_uuid": attempt(cl.ReplaceFilter, "x", 0, [], "ACCEPT", []),
    "replace_bad_action": attempt(cl.ReplaceFilter, None, 0, [], "accept", []),
    "delete": attempt(cl.DeleteFilter, uuid),
    "delete_again": attempt(cl.DeleteFilter, uuid),
}
print(json.dumps(out))
"""


def _attempt(call: Any, *args: Any) -> list[Any]:
    try:
        return ["ok", call(*args)]
    except errors.GenericError as err:
        name = "RequestError" if type(err) is errors.LuxiError else type(err).__name__
        return [name, [str(arg) for arg in err.args]]


def test_ganeti_luxi_client(gcluster: TestCluster) -> None:
    result = run_ganeti_python(gcluster.paths.root, LUXI_CALLS % {"fields": FIELDS})
    assert result.rc == 0, result.stderr
    theirs = json.loads(result.stdout)
    uuid = theirs["uuid"]
    ((stored,),) = [theirs["query_filters"]]
    assert stored[0] == uuid and stored[2:5] == [
        4,
        [["reason", ["==", "reason", "x"]]],
        ["RATE_LIMIT", 5],
    ]
    assert theirs["query"]["data"] == [[[0, value] for value in stored]]
    with gcluster.client() as client:
        assert theirs["query_fields"] == client.query_fields("filter")
        assert theirs["query"]["fields"] == client.query("filter", FIELDS)["fields"]
        ours = {
            "unknown_field": _attempt(client.call, "QueryFilters", None, ["uuid", "colour"]),
            "replace_bad_uuid": _attempt(client.call, "ReplaceFilter", "x", 0, [], "ACCEPT", []),
            "replace_bad_action": _attempt(client.call, "ReplaceFilter", None, 0, [], "accept", []),
            "delete_again": _attempt(client.call, "DeleteFilter", uuid),
        }
    assert theirs["delete"] == ["ok", None]
    assert {key: theirs[key] for key in ours} == ours
    assert ours["delete_again"] == [
        "GenericError",
        [f"Filter rule with UUID {uuid} does not exist"],
    ]


def _delay(cl: TestCluster, reason: str) -> int:
    """Ganeti's gnt-debug submits a delay (locking no node) with ``reason``."""
    argv = ["gnt-debug", "delay", "--print-jobid", "--submit", "-i", "--no-master",
            f"--reason={reason}", "300"]  # fmt: skip
    result = run_ganeti(cl.paths.root, argv)
    assert result.rc == 0, result.stderr
    return int(result.stdout)


def test_ad_hoc_reason_rate_limit(gcluster: TestCluster) -> None:
    """QA's TestAdHocReasonRateLimit: of three jobs with the reason
    rate-limit:2:hello, two run and one waits until one of them ends; another
    bucket (rate-limit:1:other) and a reason that is no limit do not count."""
    cl = gcluster
    first, second, third = (_delay(cl, "rate-limit:2:hello") for _ in range(3))
    other, plain = _delay(cl, "rate-limit:1:other"), _delay(cl, "rate-limit:0:hello")
    with cl.client() as client:
        gates = {job: delay_gate_path(client, job) for job in (first, second, other, plain)}
        assert client.query_jobs([third], ["status", "start_ts"]) == [["queued", None]]
        release_gate(gates.pop(first))
        gates[third] = delay_gate_path(client, third)  # it starts once the first ended
        for gate in gates.values():
            release_gate(gate)
        assert {row[0] for row in wait_final(client, [first, second, third, other, plain])} == {
            "success"
        }
