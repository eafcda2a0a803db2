"""gnt-debug: delay, submit-job, test-jobqueue, locks (as Ganeti 3.0.2's)."""

from __future__ import annotations

import argparse
import json
import time

from corral import constants as C
from corral import errors
from corral.cli import common
from corral.cli.debug_jobqueue import test_jobqueue
from corral.cli.jobexec import JobExecutor
from corral.cli.optvalues import split_key_val
from corral.cli.table import generic_list

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

LOCK_FIELDS = ["name", "mode", "owner", "pending"]


def cmd_delay(opts: argparse.Namespace) -> int:
    (text,) = opts.args
    try:
        duration = float(text)
    except ValueError:
        raise errors.OpPrereqError(
            f"Invalid duration '{text}'; give the number of seconds", C.ECODE_INVAL
        ) from None
    op = {
        "OP_ID": "OP_TEST_DELAY",
        "duration": duration,
        "on_master": opts.on_master,
        "on_nodes": opts.on_nodes,
        "repeat": opts.repeat,
        "interruptible": opts.interruptible,
        "no_locks": opts.no_locks,
    }
    common.submit_or_send(opts, op)
    return C.EXIT_SUCCESS


def cmd_test_osparams(opts: argparse.Namespace) -> int:
    op = {"OP_ID": "OP_TEST_OS_PARAMS", "osparams_secret": opts.osparams_secret}
    common.submit_or_send(opts, op)
    return C.EXIT_SUCCESS


def _load_ops(path: str) -> list[dict[str, Any]]:
    """The opcodes of a ``submit-job`` file: a JSON list of serialized opcodes."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as err:
        raise errors.OpPrereqError(
            f"Cannot read opcodes from {path}: {err}", C.ECODE_INVAL
        ) from None
    if not isinstance(data, list) or not all(isinstance(op, dict) for op in data):
        raise errors.OpPrereqError(
            f"{path} must hold a JSON list of opcodes (objects with an OP_ID)", C.ECODE_INVAL
        )
    return data


def cmd_submit_job(opts: argparse.Namespace) -> int:
    jex = JobExecutor(common.get_client(), opts, verbose=opts.verbose)
    # As Ganeti's command: the options' debug level, dry run and priority
    # override what the files say.
    generic = common.common_op_fields(opts)
    op_count = job_count = 0
    if opts.timing_stats:
        print("Loading...")
    for job_index in range(opts.rep_job):
        for path in opts.args:
            ops = [{**op, **generic} for op in _load_ops(path)] * opts.rep_op
            jex.queue_job(f"file {path}/{job_index}", *ops)
            op_count += len(ops)
            job_count += 1
    started = time.time()
    if opts.timing_stats:
        print("Submitting...")
    jex.submit_pending(each=opts.each)
    submitted = time.time()
    if opts.timing_stats:
        print("Executing...")
    jex.get_results()
    if opts.timing_stats:
        done = time.time()
        print(f"C:op     {op_count:4d}")
        print(f"C:job    {job_count:4d}")
        print(f"T:submit {submitted - started:4.4f}")
        print(f"T:exec   {done - submitted:4.4f}")
        print(f"T:total  {done - started:4.4f}")
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
        if rc != C.EXIT_SUCCESS or not opts.interval:
            return rc
        print()
        time.sleep(opts.interval)


def cmd_test_jobqueue(opts: argparse.Namespace) -> int:
    test_jobqueue(opts)
    return C.EXIT_SUCCESS


def _add_delay(sub: Any) -> None:
    p = common.add_command(sub, "delay", cmd_delay, "Executes a TestDelay OpCode")
    p.add_argument(
        "--no-master",
        dest="on_master",
        action="store_false",
        help="Do not sleep in the master code",
    )
    p.add_argument(
        "-n", dest="on_nodes", action="append", default=[], help="Select nodes to sleep on"
    )
    p.add_argument(
        "-r", "--repeat", type=int, default=0, help="Number of times to repeat the sleep"
    )
    p.add_argument(
        "-i",
        "--interruptible",
        action="store_true",
        help="Allows the opcode to be interrupted by using a domain socket",
    )
    p.add_argument(
        "-l", "--no-locks", action="store_true", help="Don't take locks while performing the delay"
    )
    common.add_submit_options(p)
    common.add_args(p, "args", "DURATION", 1, 1)


def _add_submit_job(sub: Any) -> None:
    p = common.add_command(
        sub,
        "submit-job",
        cmd_submit_job,
        "Submits jobs built from json files containing a list of serialized opcodes",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="Verbose output")
    p.add_argument(
        "--op-repeat", dest="rep_op", type=int, default=1,
        help="Repeat the opcode sequence this number of times",
    )  # fmt: skip
    p.add_argument(
        "--job-repeat", dest="rep_job", type=int, default=1,
        help="Repeat the job this number of times",
    )  # fmt: skip
    p.add_argument("--timing-stats", action="store_true", help="Show timing stats")
    p.add_argument("--each", action="store_true", help="Submit each job separately")
    p.add_argument("--dry-run", action="store_true", help="Only check the parameters")
    common.add_priority_option(p)
    common.add_args(p, "args", "OP-LIST-FILE", 1, None)


def build_parser() -> common.Parser:
    parser, sub = common.make_parser("gnt-debug", "Debug commands")
    _add_delay(sub)
    _add_submit_job(sub)
    p = common.add_command(
        sub, "test-jobqueue", cmd_test_jobqueue, "Test a few aspects of the job queue"
    )
    common.add_priority_option(p)
    common.add_args(p, "args", "", 0, 0)
    p = common.add_command(sub, "locks", cmd_locks, "Show a list of locks in the master daemon")
    common.add_list_options(p)
    p.add_argument("--interval", type=int, help="Time (in seconds) between repetitions")
    common.add_args(p, "args", "", 0, 0)
    p = common.add_command(
        sub, "test-osparams", cmd_test_osparams, "Test secret os parameter transmission"
    )
    p.add_argument(
        "--os-parameters-secret",
        dest="osparams_secret",
        type=lambda value: split_key_val("--os-parameters-secret", value),
        default={},
        help="Secret OS parameters (won't be logged or saved; you must supply these for"
        " every operation.)",
    )
    common.add_submit_options(p)
    common.add_args(p, "args", "", 0, 0)
    common.add_not_built(sub, "gnt-debug", ["iallocator", "allocator", "metad", "wconfd"])
    return parser


main, cli = common.entry_points(build_parser)


if __name__ == "__main__":
    cli()
