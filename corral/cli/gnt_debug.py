"""gnt-debug: delay, locks, test-jobqueue."""

from __future__ import annotations

import argparse
import time
from typing import Any

from corral import constants as C
from corral import errors
from corral.cli import common
from corral.cli.table import generic_list

LOCK_FIELDS = ["name", "mode", "owner", "pending"]


def cmd_delay(opts: argparse.Namespace) -> int:
    try:
        duration = float(opts.duration)
    except ValueError:
        raise errors.OpPrereqError(f"Invalid duration '{opts.duration}'", C.ECODE_INVAL) from None
    op = {
        "OP_ID": "OP_TEST_DELAY",
        "duration": duration,
        "on_master": opts.on_master,
        "on_nodes": opts.on_nodes or [],
        "repeat": opts.repeat,
        "interruptible": opts.interruptible,
        "no_locks": opts.no_locks,
    }
    common.submit_or_send(opts, op)
    return C.EXIT_SUCCESS


def _format_pending(value: Any) -> str:
    if not value:
        return "-"
    return ", ".join(f"{mode}:{','.join(owners)}" for mode, owners in value)


_LOCK_FORMATTERS = {
    "mode": lambda v: v or "-",
    "owner": lambda v: ",".join(v) if v else "-",
    "pending": _format_pending,
}


def cmd_locks(opts: argparse.Namespace) -> int:
    fields = common.output_fields(opts, LOCK_FIELDS)
    client = common.get_client()
    while True:
        rc = generic_list(client, C.QR_LOCK, fields, None, opts, _LOCK_FORMATTERS)
        if not opts.interval:
            return rc
        time.sleep(opts.interval)
        print()


def _run_job(client: Any, ops: list[dict[str, Any]]) -> list[Any]:
    return list(common.poll_job(client, client.submit_job(ops), None))


def _test_submission(client: Any) -> None:
    """Bad submissions are refused one by one; good ones in the same batch run."""
    print("Testing job submission")
    bad = [{"OP_ID": "OP_TEST_DELAY", "duration": "x"}]
    good = [{"OP_ID": "OP_TEST_DELAY", "duration": 0}]
    results = client.submit_many_jobs([good, bad, good])
    if [r[0] for r in results] != [True, False, True]:
        raise errors.OpExecError(f"Unexpected submission results: {results}")
    for ok, job_id in results:
        if ok:
            common.poll_job(client, job_id, None)
    print("Job submission tests were successful")


def _test_dependencies(client: Any) -> None:
    print("Testing job dependencies")
    first = {"OP_ID": "OP_TEST_DELAY", "duration": 0}
    after_ok = {"OP_ID": "OP_TEST_DELAY", "duration": 0, "depends": [[-1, ["success"]]]}
    after_err = {"OP_ID": "OP_TEST_DELAY", "duration": 0, "depends": [[-2, ["error"]]]}
    results = client.submit_many_jobs([[first], [after_ok], [after_err]])
    ids = [job_id for _, job_id in results]
    common.poll_job(client, ids[0], None)
    common.poll_job(client, ids[1], None)
    try:
        common.poll_job(client, ids[2], None)
    except errors.OpExecError:
        pass
    else:
        raise errors.OpExecError("A job with an unmet dependency did not fail")
    print("Job dependency tests were successful")


def _test_mode(client: Any, mode: str, ops: list[dict[str, Any]], should_fail: bool) -> None:
    print(f"Testing {mode}")
    messages = ["Hello World", "A", "", "B", "Foo|bar|baz", time.ctime()]
    for op in ops:
        op.setdefault("log_messages", messages)
    try:
        _run_job(client, ops)
    except errors.OpExecError as err:
        if not should_fail:
            raise
        print(f"Ignoring error for '{mode}' test: {err.message}")
    else:
        if should_fail:
            raise errors.OpExecError(f"The '{mode}' test did not fail")


def cmd_test_jobqueue(opts: argparse.Namespace) -> int:
    client = common.get_client()
    _test_submission(client)
    _test_dependencies(client)
    jq = {"OP_ID": "OP_TEST_JQUEUE", "notify_waitlock": True, "notify_exec": True}
    _test_mode(client, "job success", [dict(jq)], False)
    _test_mode(client, "multiple successful opcodes", [dict(jq), dict(jq)], False)
    _test_mode(client, "job failure", [{**jq, "fail": True}], True)
    _test_mode(client, "partial job failure", [dict(jq), dict(jq), {**jq, "fail": True}], True)
    print("Job queue test successful")
    return C.EXIT_SUCCESS


def build_parser() -> common.Parser:
    parser, sub = common.make_parser("gnt-debug", "Debug commands")
    p = common.add_command(
        sub, "delay", cmd_delay, "Sleep for a while (on the master and/or nodes), as a job"
    )
    p.add_argument("duration", metavar="DURATION")
    p.add_argument(
        "--no-master", dest="on_master", action="store_false", help="Do not sleep on the master"
    )
    p.add_argument("-n", "--node", dest="on_nodes", action="append", help="Sleep on NODE too")
    p.add_argument("-r", "--repeat", type=int, default=0, help="Repeat the delay N times")
    p.add_argument("-i", "--interruptible", action="store_true")
    p.add_argument("-l", "--no-locks", action="store_true", help="Do not take locks")
    common.add_submit_options(p)
    p = common.add_command(sub, "locks", cmd_locks, "Show the locks, their owners and waiters")
    common.add_list_options(p)
    p.add_argument("--interval", type=float, help="Repeat every INTERVAL seconds")
    p = common.add_command(sub, "test-jobqueue", cmd_test_jobqueue, "Exercise the job queue")
    p.add_argument("--priority", choices=sorted(C.PRIORITY_NAMES))
    return parser


main, cli = common.entry_points(build_parser)


if __name__ == "__main__":
    cli()
