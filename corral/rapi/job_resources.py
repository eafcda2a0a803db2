"""Job resources: list, status, cancel, and waiting for a change."""

from __future__ import annotations

import json
from typing import Any

from corral.rapi.call import Call
from corral.rapi.common import map_rows, uri_list
from corral.rapi.errors import bad_request, not_found
from corral.rapi.table import WRITERS, Resource, method

J_FIELDS_BULK = ["id", "ops", "status", "summary", "opstatus", "received_ts", "start_ts", "end_ts"]
J_FIELDS = [*J_FIELDS_BULK, "oplog", "opresult"]
# Seconds one /wait request waits for a change (Ganeti's _WFJC_TIMEOUT).
WAIT_TIMEOUT = 10.0


async def list_jobs(call: Call) -> Any:
    if call.bulk:
        return map_rows(J_FIELDS_BULK, await call.luxi.query_jobs(None, J_FIELDS_BULK))
    rows = await call.luxi.query_jobs(None, ["id"])
    return uri_list([row[0] for row in rows], "/2/jobs/%s")


async def get_job(call: Call) -> Any:
    (row,) = await call.luxi.query_jobs([int(call.items[0])], J_FIELDS)
    if row is None:
        raise not_found()
    return dict(zip(J_FIELDS, row, strict=True))


async def cancel_job(call: Call) -> Any:
    # ?kill=1 (Corral's, as gnt-job cancel --kill): a running job too; move-instance
    # uses it to stop one side of a move when the other side failed.
    return await call.luxi.call("CancelJob", int(call.items[0]), call.flag("kill"))


def _wait_params(call: Call) -> tuple[Any, Any, Any]:
    """The wait's parameters: from the body, as Ganeti; or, as a Corral
    extension for browsers (which send no body with GET), from the query:
    ``?fields=status,opstatus&previous_job_info=[...]&previous_log_serial=N``."""
    if call.body is None and "fields" in call.query:
        try:
            prev_info = json.loads(call.str_arg("previous_job_info") or "null")
        except ValueError:
            raise bad_request("The 'previous_job_info' parameter should be JSON") from None
        serial = call.str_arg("previous_log_serial")
        return (
            (call.str_arg("fields") or "").split(","),
            prev_info,
            None if serial is None else call.int_arg("previous_log_serial"),
        )
    return (
        call.param("fields"),
        call.param("previous_job_info", None),
        call.param("previous_log_serial", None),
    )


async def wait_job(call: Call) -> Any:
    fields, prev_info, prev_serial = _wait_params(call)
    if not isinstance(fields, list):
        raise bad_request("The 'fields' parameter should be a list")
    if not (prev_info is None or isinstance(prev_info, list)):
        raise bad_request("The 'previous_job_info' parameter should be a list")
    if not (
        prev_serial is None or (isinstance(prev_serial, int) and not isinstance(prev_serial, bool))
    ):
        raise bad_request("The 'previous_log_serial' parameter should be a number")
    result = await call.luxi.wait_for_job_change(
        int(call.items[0]), fields, prev_info, prev_serial, WAIT_TIMEOUT
    )
    if not result:
        raise not_found()
    if result == "nochange":
        return None
    job_info, log_entries = result
    return {"job_info": job_info, "log_entries": log_entries}


RESOURCES = [
    Resource("jobs", "/2/jobs", {"GET": method(list_jobs, "Jobs")}),
    Resource(
        "jobs_id",
        "/2/jobs/{job_id}",
        {
            "GET": method(get_job, "A job's status, opcodes, log and results"),
            "DELETE": method(cancel_job, "Cancel a job (?kill=1: a running one too)", WRITERS),
        },
    ),
    Resource(
        "jobs_id_wait",
        "/2/jobs/{job_id}/wait",
        {"GET": method(wait_job, "Wait (up to 10 s) for a job to change", WRITERS)},
    ),
]
