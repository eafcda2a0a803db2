"""``gnt-debug test-jobqueue``: Ganeti 3.0.2's checks of a job queue.

Submission (bad priorities refuse a whole submission), dependencies (relative
ids resolved, order kept), then four runs of OP_TEST_JQUEUE (success, several
opcodes, failure, partial failure) followed through the test protocol: at
each notification the opcode waits on a unix socket until this client has
connected, checked the job's status and closed it.
"""

from __future__ import annotations

import argparse
import socket
import time
from collections.abc import Sequence

from corral import constants as C
from corral import errors
from corral.cli import common
from corral.cli.jobexec import JobExecutor

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

# The modes of the opcode runs, in Ganeti's order.
SUCCESS, MULTI_SUCCESS, FAIL, PARTIAL_FAIL = range(4)
# Seconds each dependency-test job sleeps, so that ordering means something.
_DEPENDENCY_DELAY = 0.1


def _delay(duration: float = 0, **fields: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_TEST_DELAY", "duration": duration, **fields}


def _must_fail(opts: argparse.Namespace, what: str, submit: Any, complaint: str) -> None:
    """``submit()`` must be refused; with --debug the refusal is shown."""
    try:
        submit()
    except errors.GenericError as err:
        if opts.debug:
            print(f"Ignoring error for '{what}' test: {err}")
    else:
        raise errors.OpExecError(complaint)


def _test_submission(opts: argparse.Namespace) -> None:
    print("Testing job submission")
    client = common.get_client()
    cases = [(0, 0, C.OP_PRIO_LOWEST), (0, 0, C.OP_PRIO_HIGHEST)]
    # Around each valid priority and each bound, in the order Ganeti's tool tries them.
    around = (C.OP_PRIO_NORMAL, C.OP_PRIO_LOWEST, C.OP_PRIO_HIGH, C.OP_PRIO_LOW, C.OP_PRIO_HIGHEST)
    for priority in around:
        for offset in (-1, 1):
            cases += [(b, a, priority + offset) for b, a in ((0, 0), (3, 0), (0, 3), (4, 2))]
    good = [_delay(), _delay(dry_run=False), _delay(dry_run=True)]
    for before, after, priority in cases:
        ops = [_delay()] * before + [_delay(priority=priority)] + [_delay()] * after
        _must_fail(
            opts,
            "wrong priority",
            lambda ops=ops: client.submit_job(ops),
            f"Submitting opcode with priority {priority} did not fail when it should"
            f" (allowed are {sorted(C.OP_PRIO_SUBMIT_VALID)})",
        )
        _must_fail(
            opts,
            "wrong priority",
            lambda ops=ops: client.submit_many_jobs([good, ops]),
            "Submitting manyjobs with an incorrect one did not fail when it should.",
        )
    print("Job submission tests were successful")


def _test_dependencies(opts: argparse.Namespace) -> None:
    print("Testing job dependencies")
    client = common.get_client()
    _must_fail(
        opts,
        "wrong dependencies",
        lambda: client.submit_job([_delay(depends=[[-1, None]])]),
        "Submitting plain opcode with relative job ID did not fail as expected",
    )
    wait = _DEPENDENCY_DELAY
    jobs = [
        [_delay(wait)],
        [_delay(wait, depends=[[-1, []]])],
        [_delay(wait, depends=[[-2, [C.JOB_STATUS_SUCCESS]]])],
        [_delay(wait, depends=[])],
        [_delay(wait, depends=[[-2, [C.JOB_STATUS_SUCCESS]]])],
    ]
    result = client.submit_many_jobs(jobs)
    if len(result) != len(jobs) or not all(len(row) == 2 for row in result):
        raise errors.OpExecError(f"Job submission doesn't match the jobs submitted: {result}")
    jex = JobExecutor(client, opts)
    for ok, job_id in result:
        jex.add_job_id(None, ok, job_id)
    job_results = jex.get_results()
    if not all(ok for ok, _ in job_results):
        raise errors.OpExecError(f"At least one of the submitted jobs failed: {job_results}")
    ids = [job_id for _, job_id in result]
    data = client.query_jobs(ids, ["id", "opexec", "ops"])
    for index, wanted in ((1, ids[0]), (2, ids[0]), (4, ids[2])):
        if data[index][2][0]["depends"][0][0] != wanted:
            raise errors.OpExecError(
                f"Job {index}'s opcode doesn't depend on correct job ID ({wanted})"
            )
    started = [row[1] for row in data]
    if not (started[0] <= started[1] and started[0] <= started[2] <= started[4]):
        raise errors.OpExecError(f"Jobs did not run in correct order: {data}")
    print("Job dependency tests were successful")


class _Reporter:
    """Follows an OP_TEST_JQUEUE job: answers its notifications, collects its
    test messages, shows every other log entry."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        self.messages: list[str] = []
        self._current: list[str] | None = None

    def __call__(self, entry: Sequence[Any]) -> None:
        _serial, _timestamp, kind, message = entry
        if kind == C.ELOG_JQUEUE_TEST:
            self._answer(*message)
        elif (
            kind == C.ELOG_MESSAGE
            and isinstance(message, str)
            and message.startswith(C.JQT_MSGPREFIX)
        ):
            if self._current is None:
                raise errors.OpExecError("Received test message without a preceding start message")
            text = message[len(C.JQT_MSGPREFIX) :]
            self._current.append(text)
            self.messages.append(text)
        else:
            common.print_feedback(entry)

    def _answer(self, path: str, test: str, arg: Any) -> None:
        if test not in C.JQT_ALL:
            raise errors.OpExecError(f"Received invalid test message {test}")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30.0)
            sock.connect(path)
            with common.get_client() as client:
                (status,) = client.query_jobs([self.job_id], ["status"])[0]
            if test == C.JQT_EXPANDNAMES and status != C.JOB_STATUS_WAITING:
                raise errors.OpExecError(
                    f"Job status while expanding names is '{status}',"
                    f" not '{C.JOB_STATUS_WAITING}' as expected"
                )
            if test in (C.JQT_EXEC, C.JQT_LOGMSG) and status != C.JOB_STATUS_RUNNING:
                raise errors.OpExecError(
                    f"Job status while executing opcode is '{status}',"
                    f" not '{C.JOB_STATUS_RUNNING}' as expected"
                )
            if test == C.JQT_STARTMSG:
                self._current = []
            elif test == C.JQT_LOGMSG and len(self._current or []) != arg:
                raise errors.OpExecError(
                    f"Received {len(self._current or [])} test messages when {arg} are expected"
                )


def _mode_plan(mode: int) -> tuple[str, list[bool], list[str]]:
    """What a mode runs: its title, each opcode's ``fail``, the statuses expected."""
    ok, error = C.OP_STATUS_SUCCESS, C.OP_STATUS_ERROR
    if mode == PARTIAL_FAIL:
        return "partial job failure", [False, False, True, False], [ok, ok, error, error]
    if mode == MULTI_SUCCESS:
        return "multiple successful opcodes", [False, False], [ok, ok]
    if mode == FAIL:
        return "job failure", [True], [error]
    return "job success", [False], [ok]


def _test_mode(opts: argparse.Namespace, mode: int) -> None:
    title, fails, expect_opstatus = _mode_plan(mode)
    print(f"Testing {title}")
    messages = [
        f"Testing mode {mode}", "Hello World", "A", "", "B", "Foo|bar|baz",
        time.strftime("%Y-%m-%d_%H_%M_%S"),
    ]  # fmt: skip
    generic = common.common_op_fields(opts)
    ops = [
        {
            **generic,
            "OP_ID": "OP_TEST_JQUEUE",
            "notify_waitlock": True,
            "notify_exec": True,
            "log_messages": messages,
            "fail": fail,
        }
        for fail in fails
    ]
    failing = any(fails)
    client = common.get_client()
    job_id = client.submit_job(ops)
    reporter = _Reporter(job_id)
    results = None
    try:
        results = common.poll_job(client, job_id, reporter)
    except errors.OpExecError as err:
        if not failing:
            raise
        print(f"Ignoring error for 'job fail' test: {err}")
    else:
        if failing:
            raise errors.OpExecError("Job didn't fail when it should")
    _check_outcome(client, job_id, results, fails, expect_opstatus)
    # Every opcode up to the failing one sends the test messages.
    expect_messages = messages * (fails.index(True) + 1 if failing else len(fails))
    if reporter.messages != expect_messages:
        raise errors.OpExecError(
            "Received test messages don't match input"
            f" (input {expect_messages!r}, received {reporter.messages!r})"
        )


def _check_outcome(
    client: Any,
    job_id: int,
    results: list[Any] | None,
    fails: list[bool],
    expect_opstatus: list[str],
) -> None:
    failing = any(fails)
    expect_results = fails.index(True) if failing else len(fails)
    if failing and results is not None:
        raise errors.OpExecError("Received result from failed job")
    if not failing and len(results or []) != expect_results:
        raise errors.OpExecError(
            f"Received {len(results or [])} results ({results}), expected {expect_results}"
        )
    final_status, final_opstatus = client.query_jobs([job_id], ["status", "opstatus"])[0]
    expect_status = C.JOB_STATUS_ERROR if failing else C.JOB_STATUS_SUCCESS
    if final_status != expect_status:
        raise errors.OpExecError(
            f"Final job status is {final_status}, not {expect_status} as expected"
        )
    if final_opstatus != expect_opstatus:
        raise errors.OpExecError(f"Opcode status is {final_opstatus}, expected {expect_opstatus}")


def test_jobqueue(opts: argparse.Namespace) -> None:
    """Run every check; the first that fails raises OpExecError."""
    _test_submission(opts)
    _test_dependencies(opts)
    for mode in (SUCCESS, MULTI_SUCCESS, FAIL, PARTIAL_FAIL):
        _test_mode(opts, mode)
    print("Job queue test successful")
