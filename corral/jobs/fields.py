"""The queryable fields of jobs (``gnt-job list -o``, Query("job"), QueryJobs).

A job record is a dict with the store's columns; unfinished jobs are
rendered into the same form from memory, so both answer alike.
"""

from __future__ import annotations

from typing import Any

from corral import constants as C
from corral.jobs.model import split_time
from corral.opcodes.base import registry
from corral.query.fields import UNAVAIL, Field, FieldSet


def _redacted_input(op_input: dict[str, Any]) -> dict[str, Any]:
    cls = registry().get(op_input.get("OP_ID", ""))
    if cls is None or not cls.PRIVATE_FIELDS:
        return op_input
    shown = dict(op_input)
    for name in cls.PRIVATE_FIELDS:
        if shown.get(name):
            shown[name] = {key: C.REDACTED for key in shown[name]}
    return shown


def _per_op(key: str, convert: Any = None) -> Any:
    if convert is None:
        return lambda r: [op[key] for op in r["ops"]]
    return lambda r: [convert(op[key]) for op in r["ops"]]


def _oplog(record: dict[str, Any]) -> list[list[Any]]:
    per_op: list[list[Any]] = [[] for _ in record["ops"]]
    for op_idx, entry in record["logs"]:
        serial, ts, kind, message = entry
        per_op[op_idx].append([serial, split_time(ts), kind, message])
    return per_op


# The job's timestamps: column, title, what it is.
_TIMESTAMPS = {
    "received_ts": ("Received", "Timestamp of when job was received"),
    "start_ts": ("Start", "Timestamp of job start"),
    "end_ts": ("End", "Timestamp of job end"),
}


def _ts(column: str) -> Field:
    title, what = _TIMESTAMPS[column]

    def getter(record: dict[str, Any]) -> Any:
        value = record[column]
        return UNAVAIL if value is None else split_time(value)

    doc = f"{what} (tuple containing seconds and microseconds)"
    return Field(column, title, C.QFT_OTHER, doc, getter, (column,))


JOB_FIELDS = FieldSet(
    [
        Field("id", "ID", C.QFT_NUMBER, "Job ID", lambda r: r["id"]),
        Field("status", "Status", C.QFT_TEXT, "Job status", lambda r: r["status"], ("status",)),
        Field(
            "priority",
            "Priority",
            C.QFT_NUMBER,
            f"Current job priority ({C.OP_PRIO_LOWEST} to {C.OP_PRIO_HIGHEST})",
            lambda r: r["priority"],
            ("priority",),
        ),
        Field(
            "archived",
            "Archived",
            C.QFT_BOOL,
            "Whether job is archived",
            lambda r: bool(r["archived"]),
        ),
        Field(
            "ops",
            "OpCodes",
            C.QFT_OTHER,
            "List of all opcodes",
            lambda r: [_redacted_input(op["input"]) for op in r["ops"]],
            ("ops",),
        ),
        Field(
            "opresult",
            "OpCode_result",
            C.QFT_OTHER,
            "List of opcodes results",
            _per_op("result"),
            ("ops",),
        ),
        Field(
            "opstatus",
            "OpCode_status",
            C.QFT_OTHER,
            "List of opcodes status",
            _per_op("status"),
            ("ops",),
        ),
        Field(
            "oplog",
            "OpCode_log",
            C.QFT_OTHER,
            "List of opcode output logs",
            _oplog,
            ("ops", "logs"),
        ),
        Field(
            "opstart",
            "OpCode_start",
            C.QFT_OTHER,
            "List of opcode start timestamps (before acquiring locks)",
            _per_op("start_timestamp", split_time),
            ("ops",),
        ),
        Field(
            "opexec",
            "OpCode_exec",
            C.QFT_OTHER,
            "List of opcode execution start timestamps (after acquiring locks)",
            _per_op("exec_timestamp", split_time),
            ("ops",),
        ),
        Field(
            "opend",
            "OpCode_end",
            C.QFT_OTHER,
            "List of opcode execution end timestamps",
            _per_op("end_timestamp", split_time),
            ("ops",),
        ),
        Field(
            "oppriority",
            "OpCode_prio",
            C.QFT_OTHER,
            "List of opcode priorities",
            _per_op("priority"),
            ("ops",),
        ),
        _ts("received_ts"),
        _ts("start_ts"),
        _ts("end_ts"),
        Field(
            "summary",
            "Summary",
            C.QFT_OTHER,
            "List of per-opcode summaries",
            lambda r: r["summary"],
            ("summary",),
        ),
    ]
)
