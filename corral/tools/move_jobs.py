"""Following a job of one side of a move through RAPI.

Each long poll (``/2/jobs/N/wait``, ~10 s at most) returns the job's new log
entries: a ``remote-import`` entry (the destination's signed certificate and
disk addresses) goes to a callback, the others to the log as Ganeti's tool
writes them.  Between polls the move's abort check runs, so that a side whose
partner failed stops waiting.  The job's error comes back as the exception
its opcode raised (OpPrereqError with its code, for opportunistic retries).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from corral import constants as C
from corral import errors
from corral.cli.common import format_log_message
from corral.rapi.client import RapiClient, RapiError

log = logging.getLogger(__name__)

RemoteImportFn = Callable[[dict[str, Any]], None]


class JobFailed(errors.GenericError):
    """A job ended without success; ``error``: what its failed opcode raised."""

    def __init__(self, job_id: int, error: errors.GenericError) -> None:
        super().__init__(str(error))
        self.job_id = job_id
        self.error = error


def error_text(err: BaseException) -> str:
    """An error as one clear line (a Ganeti error's message, without its code)."""
    if isinstance(err, JobFailed):
        err = err.error
    if isinstance(err, errors.GenericError) and err.args:
        return str(err.args[0])
    return str(err) or type(err).__name__


def _report(job_id: int, entry: list[Any], remote_import: RemoteImportFn | None) -> None:
    _serial, timestamp, kind, message = entry
    if kind == C.ELOG_REMOTE_IMPORT:
        log.debug("Received remote import information")
        if remote_import is None or not isinstance(message, dict):
            raise errors.GenericError(f"Job {job_id} sent unexpected remote import information")
        if "x509_ca" not in message or "disks" not in message:
            raise errors.GenericError(f"Job {job_id} sent incomplete remote import information")
        remote_import(message)
        return
    seconds = timestamp[0] + timestamp[1] / 1e6 if timestamp else time.time()
    log.info("[%s] %s", time.ctime(seconds), format_log_message(kind, message))


def follow_job(
    client: RapiClient,
    job_id: int,
    check_abort: Callable[[], None],
    remote_import: RemoteImportFn | None = None,
) -> list[Any]:
    """Wait for ``job_id`` to finish, reporting its log; its opcodes' results,
    or JobFailed.  ``check_abort`` (called before each long poll) raises to stop
    waiting; the job runs on unless the caller cancels it."""
    info: list[Any] | None = None
    serial: int | None = None
    while info is None or info[0] not in C.JOB_STATUS_FINALIZED:
        check_abort()
        change = client.wait_for_job_change(job_id, ["status"], info, serial)
        if change is None:
            continue
        info, entries = change["job_info"], change["log_entries"]
        for entry in entries:
            _report(job_id, entry, remote_import)
            serial = max(serial or 0, entry[0])
    return job_result(client.get_job_status(job_id), job_id)


def job_result(status: dict[str, Any], job_id: int) -> list[Any]:
    """The results of a finished job (``GET /2/jobs/N``), or JobFailed."""
    if status["status"] == C.JOB_STATUS_SUCCESS:
        return list(status["opresult"])
    if status["status"] in (C.JOB_STATUS_CANCELING, C.JOB_STATUS_CANCELED):
        raise JobFailed(job_id, errors.OpExecError(f"Job {job_id} was canceled"))
    for op_status, result in zip(status["opstatus"], status["opresult"], strict=True):
        if op_status == C.OP_STATUS_ERROR:
            raise JobFailed(job_id, errors.decode_exception(result))
    raise JobFailed(job_id, errors.OpExecError(f"Job {job_id} failed: {status['opresult']}"))


def cancel_job(client: RapiClient, job_id: int) -> None:
    """Cancel a job, running or not (``?kill=1``); a failure is only logged."""
    try:
        ok, message = client.cancel_job(job_id, kill=True)
    except RapiError as err:
        ok, message = False, str(err)
    log.log(logging.INFO if ok else logging.WARNING, "Cancelling job %s: %s", job_id, message)
