"""gnt-job: list, list-fields, info, watch, wait, cancel, archive, autoarchive,
change-priority."""

from __future__ import annotations

import argparse
import sys
import time

from corral import constants as C
from corral import errors
from corral.cli import common, optvalues
from corral.cli.errors_fmt import format_error
from corral.cli.generic_info import format_generic_info
from corral.cli.table import (
    add_filter_option,
    generic_list,
    generic_list_fields,
    list_filter,
    names_filter,
    print_query_result,
)

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

DEFAULT_FIELDS = ["id", "status", "summary"]
# The status selections; as in Ganeti, the last one given wins.
_STATUS_OPTIONS = {
    "pending": (
        [C.JOB_STATUS_QUEUED, C.JOB_STATUS_WAITING, C.JOB_STATUS_CANCELING],
        "Select jobs pending execution or being cancelled",
    ),
    "running": ([C.JOB_STATUS_RUNNING], "Show jobs currently running only"),
    "error": ([C.JOB_STATUS_ERROR], "Show failed jobs only"),
    "finished": (sorted(C.JOB_STATUS_FINALIZED), "Show finished jobs only"),
    "queued": ([C.JOB_STATUS_QUEUED], "Select queued jobs only"),
    "waiting": ([C.JOB_STATUS_WAITING], "Select waiting jobs only"),
}


def _job_ids(args: list[str]) -> list[int]:
    try:
        return [int(a) for a in args]
    except ValueError as err:
        raise errors.OpPrereqError(f"Invalid job ID passed: {err}", C.ECODE_INVAL) from None


def format_timestamp(ts: Any) -> str:
    if not isinstance(ts, list | tuple) or len(ts) != 2:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts[0])) + f".{ts[1]:06d}"


# As Ganeti's: other fields, the job timestamps among them, are shown raw.
_LIST_FORMATTERS = {
    "summary": lambda v: ",".join(v),
    "opstart": lambda v: str([format_timestamp(t) for t in v]),
    "opexec": lambda v: str([format_timestamp(t) for t in v]),
    "opend": lambda v: str([format_timestamp(t) for t in v]),
}


def cmd_list(opts: argparse.Namespace) -> int:
    fields = common.output_fields(opts, DEFAULT_FIELDS)
    if opts.archived and "archived" not in fields:
        fields.append("archived")
    status = names_filter("status", opts.status_filter or [])
    qfilter = list_filter(opts, opts.ids, status, namefield="id", isnumeric=True)
    return generic_list(common.get_client(), C.QR_JOB, fields, qfilter, opts, _LIST_FORMATTERS)


def cmd_list_fields(opts: argparse.Namespace) -> int:
    return generic_list_fields(common.get_client(), C.QR_JOB, opts.fields, opts)


_INFO_FIELDS = [
    "id",
    "status",
    "ops",
    "opresult",
    "opstatus",
    "oplog",
    "opstart",
    "opexec",
    "opend",
    "received_ts",
    "start_ts",
    "end_ts",
]


def _delta(start: Any, end: Any) -> float:
    return float(end[0] - start[0] + (end[1] - start[1]) / 1000000.0)


def _job_timestamp(name: str, ts: Any, prior: Any = None) -> tuple[str, str, str]:
    if ts is None:
        return (name, f"unknown ({ts})", "job_timestamp")
    delta = f" (delta {_delta(prior, ts):.6f}s)" if prior is not None else ""
    return (name, f"{format_timestamp(ts)}{delta}", "job_timestamp")


def _op_timestamp(name: str, ts: Any) -> tuple[str, str, str]:
    text = format_timestamp(ts) if isinstance(ts, list | tuple) else "N/A"
    return (name, text, "opcode_timestamp")


def _job_info(row: list[Any]) -> list[tuple[str, Any] | tuple[str, Any, str]]:
    """One job as ``gnt-job info`` shows it (Ganeti's ordered layout)."""
    (job_id, status, ops, opresult, opstatus, oplog, opstart, opexec, opend) = row[:9]
    received, started, ended = row[9:]
    info: list[tuple[str, Any] | tuple[str, Any, str]] = [("Job ID", job_id), ("Status", status)]
    info.append(_job_timestamp("Received", received))
    info.append(_job_timestamp("Processing start", started, received))
    info.append(_job_timestamp("Processing end", ended, started))
    if ended is not None and received is not None:
        info.append(("Total processing time", f"{_delta(received, ended):.6f} seconds"))
    else:
        info.append(("Total processing time", "N/A"))
    opcodes = []
    for op, result, op_status, log, start, exe, end in zip(
        ops, opresult, opstatus, oplog, opstart, opexec, opend, strict=False
    ):
        entries = [
            [
                ("Time", format_timestamp(when)),
                ("Content", (serial, kind, common.format_log_message(kind, message))),
            ]
            for serial, when, kind, message in log
        ]
        opcodes.append(
            [
                ("Opcode", op["OP_ID"]),
                ("Status", op_status),
                _op_timestamp("Processing start", start),
                _op_timestamp("Execution start", exe),
                _op_timestamp("Processing end", end),
                ("Input fields", op),
                ("Result", result),
                ("Execution log", entries),
            ]
        )
    info.append(("Opcodes", opcodes))
    return info


def cmd_info(opts: argparse.Namespace) -> int:
    ids = _job_ids(opts.ids)
    client = common.get_client()
    result = client.query(C.QR_JOB, _INFO_FIELDS, names_filter("id", ids))
    container: list[Any] = []
    for row in result["data"]:
        if row[1][0] != C.RS_NORMAL:
            container.append(f"Job ID {row[0][1]} not found")
            continue
        container.append(_job_info([value for _status, value in row]))
    print(format_generic_info(container))
    return C.EXIT_SUCCESS


def _watch(opts: argparse.Namespace, show: bool) -> int:
    (job,) = opts.job_id
    if show:
        header = f"Output from job {job} follows"
        print(header)
        print("-" * len(header), flush=True)
    try:
        (job_id,) = _job_ids([job])
        common.poll_job(common.get_client(), job_id, common.print_feedback if show else None)
    except errors.GenericError as err:
        rc, text = format_error(err)
        print(f"Job {job} failed: {text}", file=sys.stderr)
        return rc
    return C.EXIT_SUCCESS


def cmd_watch(opts: argparse.Namespace) -> int:
    return _watch(opts, show=True)


def cmd_wait(opts: argparse.Namespace) -> int:
    return _watch(opts, show=False)


def _for_each_job(opts: argparse.Namespace, question: str, action: Any) -> int:
    """Apply ``action(client, job_id) -> (success, message)`` to the jobs named,
    or to those with the selected status once listed and confirmed."""
    if bool(opts.ids) == (opts.status_filter is not None):
        raise errors.OpPrereqError(
            "Either a status filter or job ID(s) must be specified and never both", C.ECODE_INVAL
        )
    client = common.get_client()
    if opts.status_filter is not None:
        result = client.query(C.QR_JOB, DEFAULT_FIELDS, names_filter("status", opts.status_filter))
        jobs = [row[0][1] for row in result["data"]]
        if not jobs:
            raise errors.OpPrereqError(
                "No jobs with the requested status have been found", C.ECODE_STATE
            )
        if not opts.force:
            shown = argparse.Namespace(no_headers=False, separator=None, verbose=False)
            print_query_result(result, shown, _LIST_FORMATTERS)
            if not common.confirm(question):
                return C.EXIT_CONFIRMATION
    else:
        jobs = opts.ids
    rc = C.EXIT_SUCCESS
    for job_id in jobs:
        success, message = action(client, job_id)
        if not success:
            rc = C.EXIT_FAILURE
        print(message)
    return rc


def cmd_cancel(opts: argparse.Namespace) -> int:
    action = "Cancel"
    if opts.kill:
        action = "KILL"
        if not opts.yes_do_it:
            raise errors.OpPrereqError(
                "The --kill option must be confirmed with --yes-do-it", C.ECODE_INVAL
            )
    return _for_each_job(
        opts,
        f"{action} job(s) listed above?",
        lambda client, job_id: client.call("CancelJob", _job_id("CancelJob", job_id), opts.kill),
    )


def cmd_change_priority(opts: argparse.Namespace) -> int:
    if not opts.priority:
        print("--priority option must be given.", file=sys.stderr)
        return C.EXIT_FAILURE
    priority = C.PRIORITY_NAMES[opts.priority]
    return _for_each_job(
        opts,
        "Change priority of job(s) listed above?",
        lambda client, job_id: client.call(
            "ChangeJobPriority", _job_id("ChangeJobPriority", job_id), priority
        ),
    )


def _job_id(method: str, value: Any) -> int:
    """A job id as Ganeti's client checks it before sending."""
    try:
        return int(value)
    except ValueError:
        raise errors.RequestError(
            f"Invalid parameter passed to {method} as job id:  expected integer, got value {value}"
        ) from None


def cmd_archive(opts: argparse.Namespace) -> int:
    client = common.get_client()
    rc = C.EXIT_SUCCESS
    for job_id in _job_ids(opts.ids):
        if not client.call("ArchiveJob", job_id):
            print(f"Failed to archive job with ID '{job_id}'", file=sys.stderr)
            rc = C.EXIT_FAILURE
    return rc


def cmd_autoarchive(opts: argparse.Namespace) -> int:
    (text,) = opts.age
    age = -1 if text == "all" else optvalues.parse_timespec(text)
    archived, left = common.get_client().call("AutoArchiveJobs", age, C.LUXI_WFJC_TIMEOUT)
    print(f"Archived {archived} jobs, {left} unchecked left")
    return C.EXIT_SUCCESS


def build_parser() -> common.Parser:
    parser, sub = common.make_parser("gnt-job", "Manage the job queue")
    p = common.add_command(sub, "list", cmd_list, "Lists the jobs and their status")
    common.add_list_options(p)
    p.add_argument("--archived", action="store_true", help="Include archived jobs")
    add_filter_option(p)
    _status_options(p, ("pending", "running", "error", "finished"))
    common.add_args(p, "ids", "JOB_ID", 0, None)
    p = common.add_command(sub, "list-fields", cmd_list_fields, "Lists all available fields")
    common.add_list_options(p, verbose=False)
    common.add_args(p, "fields", "FIELD", 0, None)
    p = common.add_command(
        sub, "info", cmd_info, "Show detailed information about jobs", aliases=["show"]
    )
    common.add_args(p, "ids", "JOB_ID", 1, None)
    for name, handler, text in (
        ("watch", cmd_watch, "Follows a job and prints its output"),
        ("wait", cmd_wait, "Wait for a job to finish"),
    ):
        p = common.add_command(sub, name, handler, text)
        common.add_args(p, "job_id", "JOB_ID", 1, 1)
    p = common.add_command(sub, "cancel", cmd_cancel, "Cancel jobs")
    _selection_options(p)
    p.add_argument("--kill", action="store_true", help="Kill running jobs too")
    p.add_argument("--yes-do-it", action="store_true", help="Confirm --kill")
    p = common.add_command(
        sub, "change-priority", cmd_change_priority, "Change the priority of jobs"
    )
    _selection_options(p)
    common.add_priority_option(p)
    p = common.add_command(sub, "archive", cmd_archive, "Archive finished jobs")
    common.add_args(p, "ids", "JOB_ID", 1, None)
    p = common.add_command(
        sub, "autoarchive", cmd_autoarchive, "Archive jobs older than AGE (e.g. 1d, 1w, 4w, all)"
    )
    common.add_args(p, "age", "AGE", 1, 1)
    return parser


def _status_options(p: argparse.ArgumentParser, names: tuple[str, ...]) -> None:
    for name in names:
        statuses, help_text = _STATUS_OPTIONS[name]
        p.add_argument(
            f"--{name}", dest="status_filter", action="store_const", const=statuses, help=help_text
        )
    p.set_defaults(status_filter=None)


def _selection_options(p: argparse.ArgumentParser) -> None:
    common.add_force(p)
    _status_options(p, ("pending", "queued", "waiting"))
    common.add_args(p, "ids", "JOB_ID", 0, None)


main, cli = common.entry_points(build_parser)


if __name__ == "__main__":
    cli()
