"""``gnt-job``: Ganeti 3.0.2's command and Corral's print the same."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from corral import constants as C
from tests.conformance.compare import (
    assert_same,
    assert_same_on_twins,
    corral,
    corral_on_terminal,
    ganeti,
    ganeti_on_terminal,
    normalized,
)
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.jobs import wait_final, wait_status
from tests.helpers.osdef import make_os

GATED = "gated.example.com"


def submit(cl: TestCluster, *ops: dict[str, Any]) -> int:
    with cl.client() as client:
        return client.submit_job(list(ops))


def delay(duration: float = 0, **extra: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_TEST_DELAY", "duration": duration, **extra}


@pytest.fixture(scope="module")
def jcluster(ganeti: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    """A cluster whose queue holds finished jobs of every kind."""
    with running_cluster(tmp_path_factory.mktemp("jobs")) as cl:
        make_os(cl.paths, "debootstrap", parameters={"dhcp": "use DHCP"})
        added = cl.gnt(
            "instance", "add", "-t", "diskless", "-o", "debootstrap+default",
            "--no-name-check", "--no-ip-check", GATED,
        )  # fmt: skip
        assert added.rc == 0, added.stderr
        ids = [
            submit(cl, delay(0.01, repeat=2)),
            submit(cl, {"OP_ID": "OP_TEST_JQUEUE", "fail": True}),
            submit(
                cl,
                {"OP_ID": "OP_TEST_JQUEUE", "log_messages": ["plain", "tab\there", "é\r"]},
                delay(0),
            ),
        ]
        with cl.client() as client:
            wait_final(client, ids)
        yield cl


class Gate:
    """A job that runs until released: it holds the only running slot, so the
    jobs submitted after it stay queued."""

    def __init__(self, cl: TestCluster) -> None:
        self.cl = cl
        self.file = cl.paths.root / "gate-open"
        cl.hook(
            "instance-stop",
            "pre",
            "50gate",
            f"#!/bin/sh\nwhile [ ! -e {self.file} ]; do sleep 0.02; done\n",
        )

    def __enter__(self) -> int:
        self.file.unlink(missing_ok=True)
        assert self.cl.gnt("cluster", "modify", "--max-running-jobs", "1").rc == 0
        self.job = submit(self.cl, {"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": GATED})
        with self.cl.client() as client:
            wait_status(client, self.job, {C.JOB_STATUS_RUNNING})
        return self.job

    def __exit__(self, *exc: object) -> None:
        self.file.touch()
        with self.cl.client() as client:
            wait_final(client, [self.job])
        assert self.cl.gnt("cluster", "modify", "--max-running-jobs", "20").rc == 0
        assert self.cl.gnt("instance", "startup", GATED).rc == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["list"],
        ["list", "--no-headers"],
        ["list", "--separator=|"],
        ["list", "-o", "id,status,summary,priority,received_ts,opstatus"],
        ["list", "-o", "+oplog,opresult"],
        ["list", "--finished"],
        ["list", "--error"],
        ["list", "--running"],
        ["list", "--pending"],
        ["list", "1", "3"],
        ["list", "-o", "id,bogus"],
        ["list", "-F", 'status == "error"'],
        ["list", 'status == "error" or id < 2'],
        ["list", "-F"],
        ["list-fields"],
        ["list-fields", "id", "status", "bogus"],
        ["list-fields", "--no-headers", "--separator=,"],
        ["info", "2"],
        ["info", "3", "4", "1"],
        ["info", "99"],
        ["info", "4", "99"],
        ["info"],
        ["info", "nine"],
        ["show", "2"],
        ["watch", "2"],
        ["watch", "3"],
        ["watch", "99"],
        ["watch"],
        ["wait", "2"],
        ["wait", "3"],
        ["wait", "1", "2"],
        ["cancel", "99"],
        ["cancel", "2"],
        ["cancel"],
        ["cancel", "--kill", "2"],
        ["cancel", "--pending", "2"],
        ["cancel", "--pending"],
        ["archive", "99"],
        ["archive"],
        ["change-priority", "2"],
        ["change-priority", "--priority", "high", "99"],
        ["change-priority", "--priority", "high", "2"],
        ["autoarchive"],
        ["autoarchive", "5x"],
        ["autoarchive", "s"],
    ],
)
def test_read_only_commands(jcluster: TestCluster, argv: list[str]) -> None:
    assert_same(jcluster, ["gnt-job", *argv])


@pytest.mark.parametrize("text", ["1", "name ==", "(status"])
def test_bad_filter_is_refused_alike(jcluster: TestCluster, text: str) -> None:
    # pyparsing's own explanation of the error is not reproduced, the rest is.
    theirs = ganeti(jcluster, ["gnt-job", "list", "-F", text])
    ours = corral(jcluster, ["gnt-job", "list", "-F", text])
    prefix = f"Error while parsing query filter: Failed to parse query filter '{text}': "
    assert (theirs.rc, ours.rc) == (1, 1)
    assert theirs.stderr.startswith(prefix) and ours.stderr.startswith(prefix)
    assert theirs.stdout == ours.stdout == ""


def test_cancel_queued_twins(jcluster: TestCluster) -> None:
    with Gate(jcluster):
        twins = (str(submit(jcluster, delay(0))), str(submit(jcluster, delay(0))))
        out = assert_same_on_twins(jcluster, ["gnt-job", "cancel", "{}"], twins)
        assert out.stdout == "Dequeued job <TWIN>\n"
        assert_same_on_twins(jcluster, ["gnt-job", "info", "{}"], twins)
        assert_same_on_twins(jcluster, ["gnt-job", "cancel", "{}"], twins)


def test_change_priority_of_queued_twins(jcluster: TestCluster) -> None:
    with Gate(jcluster):
        twins = (str(submit(jcluster, delay(0))), str(submit(jcluster, delay(0))))
        argv = ["gnt-job", "change-priority", "--priority", "low", "{}"]
        out = assert_same_on_twins(jcluster, argv, twins)
        assert "have been changed to 10" in out.stdout
        assert_same_on_twins(jcluster, ["gnt-job", "list", "-o", "id,priority", "{}"], twins)


def test_archive_twins(jcluster: TestCluster) -> None:
    twins = (str(submit(jcluster, delay(0))), str(submit(jcluster, delay(0))))
    with jcluster.client() as client:
        wait_final(client, [int(t) for t in twins])
    out = assert_same_on_twins(jcluster, ["gnt-job", "archive", "{}"], twins)
    assert out.rc == 0
    assert_same_on_twins(jcluster, ["gnt-job", "info", "{}"], twins)
    assert_same_on_twins(jcluster, ["gnt-job", "archive", "{}"], twins)


def test_autoarchive_counts_alike(jcluster: TestCluster) -> None:
    with jcluster.client() as client:
        finished = len(
            [r for r in client.query_jobs(None, ["status"]) if r[0] in C.JOB_STATUS_FINALIZED]
        )
    theirs = ganeti(jcluster, ["gnt-job", "autoarchive", "all"])
    fresh = [submit(jcluster, delay(0)) for _ in range(finished)]
    with jcluster.client() as client:
        wait_final(client, fresh)
    ours = corral(jcluster, ["gnt-job", "autoarchive", "all"])
    assert (ours.rc, ours.stdout, ours.stderr) == (theirs.rc, theirs.stdout, theirs.stderr)
    assert theirs.stdout == f"Archived {finished} jobs, 0 unchecked left\n"


@pytest.mark.parametrize("answer", ["n", "y"])
def test_cancel_pending_asks_first(jcluster: TestCluster, answer: str) -> None:
    with Gate(jcluster) as gate:
        queued = [submit(jcluster, delay(0)) for _ in range(2)]
        theirs = ganeti_on_terminal(jcluster, ["gnt-job", "cancel", "--pending"], answer)
        if answer == "y":  # Ganeti's run canceled them: make the same jobs again
            queued = [submit(jcluster, delay(0)) for _ in range(2)]
        ours = corral_on_terminal(jcluster, ["gnt-job", "cancel", "--pending"], answer)
    names = {str(gate): "<GATE>"}
    if answer == "y":
        assert theirs[0] == ours[0] == 0
        assert normalized(theirs[1], names).count("Dequeued job") == 2
        assert normalized(ours[1], names).count("Dequeued job") == 2
        return
    assert (ours[0], normalized(ours[1], names)) == (theirs[0], normalized(theirs[1], names))
    assert str(queued[0]) in ours[1]
