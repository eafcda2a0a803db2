"""``gnt-debug``: Ganeti 3.0.2's command and Corral's print the same."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conformance.compare import Output, assert_same, corral, difference, ganeti
from tests.helpers.cluster import Result, TestCluster, running_cluster
from tests.helpers.jobs import delay_gate_path, release_gate, wait_final, wait_new_job
from tests.helpers.waiting import wait_until

Tool = Callable[[TestCluster, list[str]], Result]
TOOLS: dict[str, Tool] = {"ganeti": ganeti, "corral": corral}

# What differs between two runs of the same command: job ids, the test
# sockets' paths, seconds counted by the clock, timing statistics.
_VARYING = [
    (re.compile(r"\b(jobs?|Job|JobID:) \d+(, \d+)*"), r"\1 <id>"),
    (re.compile(r"^\d+$", re.MULTILINE), "<id>"),
    (re.compile(r"'/tmp/[^']+/sock'"), "'<socket>'"),
    (re.compile(r"(time to go is|time spent waiting:) \d+"), r"\1 <n>"),
    (re.compile(r"\b\d+\.\d{4}\b"), "<seconds>"),
    (re.compile(r"\d{4}-\d\d-\d\d_\d\d_\d\d_\d\d"), "<stamp>"),
]


def comparable(result: Result) -> Output:
    """The output with times of day and the run-specific parts blanked."""
    out = Output.of(result)
    texts = []
    for text in (out.stdout, out.stderr):
        for pattern, replacement in _VARYING:
            text = pattern.sub(replacement, text)
        texts.append(text)
    return Output(out.rc, *texts)


def assert_same_runs(cl: TestCluster, argv: list[str]) -> Output:
    """Both tools run ``argv`` in turn (each making its own jobs); equal outputs."""
    theirs, ours = comparable(ganeti(cl, argv)), comparable(corral(cl, argv))
    assert ours == theirs, f"{argv}\n{difference(theirs, ours)}"
    return ours


@pytest.fixture(scope="module")
def dcluster(ganeti: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("debug")) as cl:
        yield cl


def test_test_jobqueue(dcluster: TestCluster) -> None:
    """Ganeti's own job-queue test passes against Corral, and Corral's prints
    what it prints (submission, dependencies, the four opcode runs)."""
    out = assert_same_runs(dcluster, ["gnt-debug", "test-jobqueue"])
    assert out.rc == 0
    assert out.stdout.splitlines()[-1] == "Job queue test successful"
    for title in ("job success", "multiple successful opcodes", "partial job failure"):
        assert f"Testing {title}\n" in out.stdout


def test_test_jobqueue_with_priority_and_debug(dcluster: TestCluster) -> None:
    """With -d, what each refused submission was refused for (Ganeti's tool also
    logs its luxi calls on standard error with -d: not compared)."""
    argv = ["gnt-debug", "test-jobqueue", "-d", "--priority", "high"]
    theirs, ours = comparable(ganeti(dcluster, argv)), comparable(corral(dcluster, argv))
    assert (ours.rc, ours.stdout) == (theirs.rc, theirs.stdout), difference(theirs, ours)
    assert "Ignoring error for 'wrong priority' test: " in ours.stdout
    assert "Ignoring error for 'wrong dependencies' test: " in ours.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["delay", "0.01"],
        ["delay", "-r", "3", "0.01"],
        ["delay", "--no-master", "-n", "{master}", "0.01"],
        ["delay", "-l", "--priority", "low", "0.01"],
        ["delay", "--dry-run", "0.01"],
        ["delay", "--submit", "0.01"],
        ["delay", "--print-jobid", "0.01"],
        ["delay", "-n", "no-such-node", "0.01"],
        ["delay", "--", "-1"],
        ["delay"],
        ["delay", "1", "2"],
        ["test-jobqueue", "extra"],
        ["locks", "extra"],
    ],
)
def test_delay_and_usage(dcluster: TestCluster, argv: list[str]) -> None:
    master = dcluster.gnt("cluster", "getmaster").stdout.strip()
    assert_same_runs(dcluster, ["gnt-debug", *(a.format(master=master) for a in argv)])


@pytest.mark.parametrize(
    "argv",
    [
        ["locks"],
        ["locks", "--no-headers", "-o", "name,mode,owner,pending"],
        ["locks", "--separator=|", "-o", "+pending", "-v"],
        ["locks", "-o", "name,nosuchfield"],
    ],
)
def test_locks(dcluster: TestCluster, argv: list[str]) -> None:
    assert_same(dcluster, ["gnt-debug", *argv])


@pytest.mark.parametrize(
    "options",
    [
        [],
        ["-v"],
        ["--op-repeat", "2", "--job-repeat", "2", "-v"],
        ["--timing-stats"],
        ["--dry-run", "--priority", "high"],
    ],
)
def test_submit_job(dcluster: TestCluster, tmp_path: Path, options: list[str]) -> None:
    ops = [{"OP_ID": "OP_TEST_DELAY", "duration": 0.01, "repeat": 2}, {"OP_ID": "OP_TEST_DELAY"}]
    first, second = tmp_path / "ops1.json", tmp_path / "ops2.json"
    first.write_text(json.dumps(ops[:1]))
    second.write_text(json.dumps(ops[:1] * 2))
    argv = ["gnt-debug", "submit-job", *options, str(first), str(second)]
    assert assert_same_runs(dcluster, argv).rc == 0
    # A file whose opcode is invalid refuses the whole submission.
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(ops[1:]))
    out = assert_same_runs(dcluster, ["gnt-debug", "submit-job", str(first), str(bad)])
    assert out.rc == 1


def _interrupted_delay(cl: TestCluster, tool: Tool, argv: list[str]) -> Result:
    """Run ``gnt-debug delay -i`` with ``tool``; release its delay once it waits."""
    with cl.client() as client:
        known = {row[0] for row in client.query_jobs(None, ["id"])}
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(tool, cl, ["gnt-debug", *argv])
        with cl.client() as client:
            job_id = wait_new_job(client, known)
            release_gate(delay_gate_path(client, job_id))
        return running.result(timeout=60)


@pytest.mark.parametrize("argv", [["delay", "-i", "300"], ["delay", "-i", "-r", "3", "300"]])
def test_interruptible_delay(dcluster: TestCluster, argv: list[str]) -> None:
    """An interruptible delay logs its socket and ends once a client connects
    and closes (the repetitions end with it)."""
    outputs = [comparable(_interrupted_delay(dcluster, tool, argv)) for tool in TOOLS.values()]
    theirs, ours = outputs
    assert ours == theirs, difference(theirs, ours)
    assert ours.rc == 0
    assert "Received connection, time to go is <n>" in ours.stdout
    assert "Interrupted, time spent waiting: <n>" in ours.stdout


def _submitted(result: Result) -> int:
    assert result.rc == 0, result.stderr
    return int(result.stderr.split()[-1])  # "JobID: <id>"


def _lock_line(cl: TestCluster, name: str) -> str:
    out = ganeti(cl, ["gnt-debug", "locks", "--no-headers", "-o", "name,mode,owner,pending"])
    return next((line for line in out.stdout.splitlines() if line.startswith(name)), "")


def test_delay_takes_its_node_locks(dcluster: TestCluster) -> None:
    """As Ganeti's QA holds node locks (qa_job_utils.RunWithLocks): an
    interruptible delay on a node locks it, and a delay on the master (which
    locks the master's node, as Ganeti's LUTestDelay does) waits for it;
    both run once the first is released."""
    name = dcluster.gnt("cluster", "getmaster").stdout.strip()
    uuid = dcluster.gnt("node", "list", "--no-headers", "-o", "uuid", name).stdout.strip()
    holder = _submitted(
        ganeti(dcluster, ["gnt-debug", "delay", "-i", "--submit", "--no-master", "-n", name, "300"])
    )
    with dcluster.client() as client:
        gate = delay_gate_path(client, holder)
        waiter = _submitted(ganeti(dcluster, ["gnt-debug", "delay", "--submit", "0.01"]))
        wait_until(
            lambda: (
                _lock_line(dcluster, f"node/{uuid}").split()
                == [f"node/{uuid}", "exclusive", str(holder), f"exclusive:{waiter}"]
            ),
            timeout=60,
            what="the master's delay waiting for the node lock",
        )
        release_gate(gate)
        assert wait_final(client, [holder, waiter], timeout=60) == [["success"], ["success"]]


def test_usage_errors_exit_codes(dcluster: TestCluster) -> None:
    """A bad option value exits 2 and an unknown command 1, as Ganeti's tools
    (argparse's wording, not optparse's: a documented difference)."""
    for argv, code in ((["delay", "-r", "x", "1"], 2), (["no-such-command"], 1)):
        theirs = ganeti(dcluster, ["gnt-debug", *argv])
        ours = corral(dcluster, ["gnt-debug", *argv])
        assert ours.rc == theirs.rc == code
        assert ours.stderr.startswith("usage: gnt-debug")


def test_bad_input_gets_clear_errors(dcluster: TestCluster, tmp_path: Path) -> None:
    """Where Ganeti's tool crashes with a traceback, Corral's says what is wrong
    (a documented difference)."""
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("[{")
    cases = [
        (["delay", "soon"], "Invalid duration 'soon'; give the number of seconds"),
        (["submit-job", str(tmp_path / "missing.json")], "Cannot read opcodes from "),
        (["submit-job", str(bad_json)], "Cannot read opcodes from "),
    ]
    for argv, message in cases:
        theirs = ganeti(dcluster, ["gnt-debug", *argv])
        assert theirs.rc == 1 and "Traceback" in theirs.stderr
        ours = corral(dcluster, ["gnt-debug", *argv])
        assert ours.rc == 1 and message in ours.stderr and "Traceback" not in ours.stderr
