"""Conversions between in-memory jobs and their stored rows."""

from __future__ import annotations

import time
from typing import Any

from corral import constants as C
from corral import errors
from corral.jobs.model import Job, LogEntry, QueuedOpCode, split_time
from corral.jobs.states import advance
from corral.opcodes.base import from_dict

__all__ = [
    "ROW_COLUMNS",
    "fail_for_storage",
    "job_from_row",
    "job_record",
    "job_row",
    "recover_job",
    "split_time",
]

# The columns of a stored job a query may ask for, besides the always-read id.
ROW_COLUMNS = (
    "status",
    "priority",
    "summary",
    "received_ts",
    "start_ts",
    "end_ts",
    "ops",
    "log_serial",
)

UNCLEAN_SHUTDOWN = "Unclean master daemon shutdown"
SECRETS_LOST = (
    "The job's secret parameters are not kept across a restart of the master daemon;"
    " submit the job again"
)


def job_row(job: Job) -> dict[str, Any]:
    """The store row of a job."""
    return {
        "id": job.id,
        "status": job.status,
        "priority": job.priority,
        "summary": job.summary,
        "received_ts": job.received_timestamp,
        "start_ts": job.start_timestamp,
        "end_ts": job.end_timestamp,
        "ops": [op.to_store() for op in job.ops],
        "log_serial": job.log_serial,
    }


def job_record(job: Job, logs: list[tuple[int, LogEntry]]) -> dict[str, Any]:
    """A query record (the row plus log entries) of an unfinished job."""
    record = job_row(job)
    record["archived"] = 0
    record["logs"] = [(idx, [e.serial, e.timestamp, e.type, e.message]) for idx, e in logs]
    return record


def job_from_row(row: dict[str, Any]) -> Job:
    """Rebuild an unfinished job after a restart of masterd."""
    ops = []
    for stored in row["ops"]:
        data = stored["input"]
        op = from_dict(data)
        qop = QueuedOpCode(
            input=op,
            status=stored["status"],
            result=stored["result"],
            priority=stored["priority"],
            start_timestamp=stored["start_timestamp"],
            exec_timestamp=stored["exec_timestamp"],
            end_timestamp=stored["end_timestamp"],
        )
        ops.append(qop)
    return Job(
        id=row["id"],
        ops=ops,
        received_timestamp=row["received_ts"],
        start_timestamp=row["start_ts"],
        end_timestamp=row["end_ts"],
        log_serial=row["log_serial"],
    )


def _has_lost_secrets(op: QueuedOpCode) -> bool:
    for name in op.input.SECRET_FIELDS:
        values = getattr(op.input, name, None) or {}
        if any(v == C.REDACTED for v in values.values()):
            return True
    return False


def moved_away(former: str, holder: str) -> str:
    """Why a job that ran under the master ``former`` ended, once ``holder``
    took the master role over (Ganeti's words, then what happened)."""
    return f"{UNCLEAN_SHUTDOWN}: the master role moved from {former} to {holder} while it ran"


def recover_job(job: Job, interrupted: str = UNCLEAN_SHUTDOWN) -> None:
    """Decide the fate of an unfinished job found at start-up (``interrupted``:
    why its running opcode ended).

    Opcodes that were running (or being canceled) cannot be resumed: they end
    as error (canceled).  Jobs that had not started an opcode run again,
    unless their secret parameters were lost with the old process.  What an
    interrupted operation had left on its nodes is settled once masterd runs
    (:mod:`corral.cmdlib.intents`).
    """
    now = time.time()
    failure: str | None = None
    for op in job.ops:
        if op.finished:
            continue
        if failure is None and op.status in (C.OP_STATUS_RUNNING, C.OP_STATUS_CANCELING):
            canceled = op.status == C.OP_STATUS_CANCELING
            advance(op, C.OP_STATUS_CANCELED if canceled else C.OP_STATUS_ERROR)
            op.result = errors.encode_exception(errors.OpExecError(interrupted))
            op.end_timestamp = now
            failure = "Preceding opcode failed"
            continue
        if failure is None and _has_lost_secrets(op):
            failure = SECRETS_LOST
        if failure is not None:
            advance(op, C.OP_STATUS_ERROR)
            op.result = errors.encode_exception(errors.OpExecError(failure))
            op.end_timestamp = now
        else:
            advance(op, C.OP_STATUS_QUEUED)
    if job.status in C.JOB_STATUS_FINALIZED:
        job.end_timestamp = now


def fail_for_storage(job: Job) -> None:
    """End a job whose state could not be written in error, saying why.

    Its unfinished opcodes fail; a job that would have succeeded has its last
    opcode fail instead, as its success never reached the disk.
    """
    if job.write_error is None or job.status in (C.JOB_STATUS_ERROR, C.JOB_STATUS_CANCELED):
        return
    result = errors.encode_exception(errors.OpExecError(job.write_error, C.ECODE_ENVIRON))
    now = time.time()
    targets = [op for op in job.ops if not op.finished] or job.ops[-1:]
    for op in targets:
        advance(op, C.OP_STATUS_ERROR)
        op.result = result
        op.end_timestamp = now
    job.end_timestamp = now
