"""gnt-job: list, list-fields, info, watch, wait, cancel, archive, autoarchive,
change-priority."""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Any

from corral import constants as C
from corral import errors
from corral.cli import common
from corral.cli.errors_fmt import ConfirmationDeclined, format_error
from corral.cli.info import format_scalar
from corral.cli.table import format_table, generic_list, generic_list_fields, names_filter

DEFAULT_FIELDS = ["id", "status", "summary"]
_STATUS_FILTERS = {
    "pending": [C.JOB_STATUS_QUEUED, C.JOB_STATUS_WAITING, C.JOB_STATUS_RUNNING],
    "running": [C.JOB_STATUS_RUNNING],
    "error": [C.JOB_STATUS_ERROR],
    "finished": sorted(C.JOB_STATUS_FINALIZED),
    "queued": [C.JOB_STATUS_QUEUED],
    "waiting": [C.JOB_STATUS_WAITING],
}


def _job_ids(args: list[str]) -> list[int]:
    try:
        return [int(a) for a in args]
    except ValueError:
        raise errors.OpPrereqError(
            f"Job ids must be numbers, got {' '.join(args)}", C.ECODE_INVAL
        ) from None


def format_timestamp(ts: Any) -> str:
    if not isinstance(ts, list | tuple) or len(ts) != 2:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts[0])) + f".{ts[1]:06d}"


_LIST_FORMATTERS = {
    "summary": lambda v: ",".join(v),
    "opstart": lambda v: ",".join(format_timestamp(t) for t in v),
    "opexec": lambda v: ",".join(format_timestamp(t) for t in v),
    "opend": lambda v: ",".join(format_timestamp(t) for t in v),
    "received_ts": format_timestamp,
    "start_ts": format_timestamp,
    "end_ts": format_timestamp,
}


def _status_filter(opts: argparse.Namespace) -> list[str] | None:
    wanted: list[str] = []
    for name in ("pending", "running", "error", "finished"):
        if getattr(opts, name, False):
            wanted += _STATUS_FILTERS[name]
    return wanted or None


def _combine(*filters: Any) -> Any:
    parts = [f for f in filters if f]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else ["&", *parts]


def cmd_list(opts: argparse.Namespace) -> int:
    fields = common.output_fields(opts, DEFAULT_FIELDS)
    if opts.archived and "archived" not in fields:
        fields.append("archived")
    qfilter = _combine(
        names_filter("id", _job_ids(opts.ids)),
        names_filter("status", _status_filter(opts) or []),
        _parse_filter(opts.filter),
    )
    return generic_list(common.get_client(), C.QR_JOB, fields, qfilter, opts, _LIST_FORMATTERS)


def _parse_filter(text: str | None) -> Any:
    if not text:
        return None
    import json

    try:
        return json.loads(text)
    except ValueError as err:
        raise errors.QueryFilterParseError(f"Filter is not JSON: {err}") from None


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


def _seconds(ts: Any) -> float | None:
    if isinstance(ts, list | tuple) and len(ts) == 2:
        return float(ts[0] + ts[1] / 1e6)
    return None


def _job_info_lines(row: list[Any]) -> list[str]:
    (
        job_id,
        status,
        ops,
        opresult,
        opstatus,
        oplog,
        opstart,
        opexec,
        opend,
        received,
        started,
        ended,
    ) = row
    out = [f"- Job ID: {job_id}", f"  Status: {status}"]
    recv_s, start_s, end_s = _seconds(received), _seconds(started), _seconds(ended)
    out.append(
        f"  Received:         {format_timestamp(received) if received else 'unknown (None)'}"
    )
    if start_s is not None:
        delta = f" (delta {start_s - recv_s:.6f}s)" if recv_s is not None else ""
        out.append(f"  Processing start: {format_timestamp(started)}{delta}")
    else:
        out.append("  Processing start: unknown (None)")
    if end_s is not None:
        # A job canceled while queued has an end but no start: no delta then.
        delta = f" (delta {end_s - start_s:.6f}s)" if start_s is not None else ""
        out.append(f"  Processing end:   {format_timestamp(ended)}{delta}")
    else:
        out.append("  Processing end:   unknown (None)")
    if end_s is not None and recv_s is not None:
        out.append(f"  Total processing time: {end_s - recv_s:.6f} seconds")
    else:
        out.append("  Total processing time: N/A")
    out.append("  Opcodes: ")
    for idx, op in enumerate(ops):
        out += _opcode_lines(
            op, opstatus[idx], opresult[idx], oplog[idx], opstart[idx], opexec[idx], opend[idx]
        )
    return out


def _opcode_lines(
    op: dict[str, Any], status: str, result: Any, log: list[Any], start: Any, exe: Any, end: Any
) -> list[str]:
    def ts(value: Any) -> str:
        return format_timestamp(value) if value else "N/A"

    out = [
        f"    - Opcode: {op.get('OP_ID')}",
        f"      Status: {status}",
        f"      Processing start: {ts(start)}",
        f"      Execution start:  {ts(exe)}",
        f"      Processing end:   {ts(end)}",
        "      Input fields: ",
    ]
    for key in sorted(op):
        out.append(f"        {key}: {format_scalar(op[key])}")
    if isinstance(result, dict) and result:
        out.append("      Result: ")
        for key in sorted(result):
            out.append(f"        {key}: {format_scalar(result[key])}")
    else:
        out.append(f"      Result: {format_scalar(result)}")
    if log:
        out.append("      Execution log: ")
        for serial, when, kind, message in log:
            out.append(f"        - Time: {format_timestamp(when)}")
            out.append(
                f"          Content: [{serial}, {kind}, {common.format_log_message(kind, message)}]"
            )
    else:
        out.append("      Execution log: ")
    return out


def cmd_info(opts: argparse.Namespace) -> int:
    client = common.get_client()
    ids = _job_ids(opts.ids)
    rows = client.query_jobs(ids or None, _INFO_FIELDS)
    rc = C.EXIT_SUCCESS
    for job_id, row in zip(ids or [r[0] for r in rows if r], rows, strict=False):
        if row is None:
            print(f"- Job ID {job_id} not found")
            rc = C.EXIT_FAILURE
            continue
        print("\n".join(_job_info_lines(row)))
    return rc


def _watch(opts: argparse.Namespace, show: bool) -> int:
    (job_id,) = _job_ids([opts.job_id])
    client = common.get_client()
    if not client.query_jobs([job_id], ["id"])[0]:
        raise errors.JobLost(f"Job with id {job_id} not found")
    if show:
        header = f"Output from job {job_id} follows"
        print(header)
        print("-" * len(header), flush=True)
    try:
        common.poll_job(client, job_id, common.print_feedback if show else None)
    except errors.GenericError as err:
        rc, text = format_error(err)
        print(f"Job {job_id} failed: {text}", file=sys.stderr)
        return rc
    return C.EXIT_SUCCESS


def cmd_watch(opts: argparse.Namespace) -> int:
    return _watch(opts, show=True)


def cmd_wait(opts: argparse.Namespace) -> int:
    return _watch(opts, show=False)


def _select_jobs(
    opts: argparse.Namespace, statuses: dict[str, list[str]], question: str
) -> list[int]:
    """Job ids from the arguments or a status filter (then listed and confirmed)."""
    chosen = [s for name, s in statuses.items() if getattr(opts, name, False)]
    if bool(chosen) == bool(opts.ids):
        raise errors.OpPrereqError(
            "Either a status filter or job ID(s) must be specified and never both", C.ECODE_INVAL
        )
    if opts.ids:
        return _job_ids(opts.ids)
    wanted = [s for group in chosen for s in group]
    client = common.get_client()
    result = client.query(C.QR_JOB, DEFAULT_FIELDS, names_filter("status", wanted))
    rows = [[cell[1] for cell in row] for row in result["data"]]
    if not rows:
        raise errors.OpPrereqError(
            "No jobs with the requested status have been found", C.ECODE_STATE
        )
    if not getattr(opts, "force", False):
        table = [[str(r[0]), r[1], ",".join(r[2])] for r in rows]
        for line in format_table(["ID", "Status", "Summary"], table, [True, False, False], None):
            print(line)
        if not common.confirm(question):
            raise ConfirmationDeclined()
    return [int(r[0]) for r in rows]


def cmd_cancel(opts: argparse.Namespace) -> int:
    if opts.kill and not opts.yes_do_it:
        raise errors.OpPrereqError(
            "The --kill option must be confirmed with --yes-do-it", C.ECODE_INVAL
        )
    statuses = {
        "pending": _STATUS_FILTERS["pending"],
        "queued": _STATUS_FILTERS["queued"],
        "waiting": _STATUS_FILTERS["waiting"],
    }
    question = "KILL job(s) listed above?" if opts.kill else "Cancel job(s) listed above?"
    ids = _select_jobs(opts, statuses, question)
    client = common.get_client()
    rc = C.EXIT_SUCCESS
    for job_id in ids:
        success, message = client.call("CancelJob", job_id, opts.kill)
        print(message)
        if not success:
            rc = C.EXIT_FAILURE
    return rc


def cmd_change_priority(opts: argparse.Namespace) -> int:
    if not opts.priority:
        print("--priority option must be given.", file=sys.stderr)
        return C.EXIT_FAILURE
    statuses = {
        "pending": _STATUS_FILTERS["pending"],
        "queued": _STATUS_FILTERS["queued"],
        "waiting": _STATUS_FILTERS["waiting"],
    }
    ids = _select_jobs(opts, statuses, "Change priority of job(s) listed above?")
    client = common.get_client()
    rc = C.EXIT_SUCCESS
    for job_id in ids:
        success, message = client.call("ChangeJobPriority", job_id, C.PRIORITY_NAMES[opts.priority])
        print(message)
        if not success:
            rc = C.EXIT_FAILURE
    return rc


def cmd_archive(opts: argparse.Namespace) -> int:
    client = common.get_client()
    rc = C.EXIT_SUCCESS
    for job_id in _job_ids(opts.ids):
        if not client.call("ArchiveJob", job_id):
            print(f"Failed to archive job with ID '{job_id}'", file=sys.stderr)
            rc = C.EXIT_FAILURE
    return rc


_TIMESPEC = re.compile(r"^(\d+)([smhdw]?)$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_timespec(text: str) -> int:
    """Seconds in ``30``, ``30s``, ``5m``, ``2h``, ``1d`` or ``4w``."""
    if not text:
        raise errors.OpPrereqError("Empty time specification passed", C.ECODE_INVAL)
    match = _TIMESPEC.match(text)
    if match is None:
        if text in _UNIT_SECONDS:
            raise errors.OpPrereqError(
                "Invalid time specification (only suffix passed)", C.ECODE_INVAL
            )
        raise errors.OpPrereqError(f"Invalid time specification '{text}'", C.ECODE_INVAL)
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def cmd_autoarchive(opts: argparse.Namespace) -> int:
    age = -1 if opts.age == "all" else parse_timespec(opts.age)
    archived, left = common.get_client().call("AutoArchiveJobs", age, C.LUXI_WFJC_TIMEOUT)
    print(f"Archived {archived} jobs, {left} unchecked left")
    return C.EXIT_SUCCESS


def build_parser() -> common.Parser:
    parser, sub = common.make_parser("gnt-job", "Manage the job queue")
    p = common.add_command(sub, "list", cmd_list, "Lists the jobs and their status")
    common.add_list_options(p)
    p.add_argument("--archived", action="store_true", help="Include archived jobs")
    p.add_argument("-F", "--filter", help="Query filter (JSON)")
    for name in ("pending", "running", "error", "finished"):
        p.add_argument(f"--{name}", action="store_true", help=f"Show only {name} jobs")
    p.add_argument("ids", nargs="*", metavar="JOB_ID")
    p = common.add_command(sub, "list-fields", cmd_list_fields, "Lists all available fields")
    common.add_list_options(p, verbose=False)
    p.add_argument("fields", nargs="*")
    p = common.add_command(
        sub, "info", cmd_info, "Show detailed information about jobs", aliases=["show"]
    )
    p.add_argument("ids", nargs="*", metavar="JOB_ID")
    for name, handler, text in (
        ("watch", cmd_watch, "Follows a job and prints its output"),
        ("wait", cmd_wait, "Wait for a job to finish"),
    ):
        p = common.add_command(sub, name, handler, text)
        p.add_argument("job_id", metavar="JOB_ID")
    p = common.add_command(sub, "cancel", cmd_cancel, "Cancel jobs")
    _selection_options(p)
    p.add_argument("--kill", action="store_true", help="Kill running jobs too")
    p.add_argument("--yes-do-it", action="store_true", help="Confirm --kill")
    p = common.add_command(
        sub, "change-priority", cmd_change_priority, "Change the priority of jobs"
    )
    _selection_options(p)
    p.add_argument("--priority", choices=sorted(C.PRIORITY_NAMES))
    p = common.add_command(sub, "archive", cmd_archive, "Archive finished jobs")
    p.add_argument("ids", nargs="+", metavar="JOB_ID")
    p = common.add_command(
        sub, "autoarchive", cmd_autoarchive, "Archive jobs older than AGE (e.g. 1d, 1w, 4w, all)"
    )
    p.add_argument("age", metavar="AGE")
    return parser


def _selection_options(p: argparse.ArgumentParser) -> None:
    common.add_force(p)
    for name in ("pending", "queued", "waiting"):
        p.add_argument(f"--{name}", action="store_true", help=f"Select all {name} jobs")
    p.add_argument("ids", nargs="*", metavar="JOB_ID")


main, cli = common.entry_points(build_parser)


if __name__ == "__main__":
    cli()
