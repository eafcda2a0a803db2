"""The states of opcodes and jobs, and the moves between them: declared here once.

An opcode moves only along ``OP_TRANSITIONS`` (``advance`` refuses any other
move: a bug, not a user's error); a job's status follows from its opcodes'
(``job_status``, Ganeti's rules).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from corral import constants as C
from corral import errors

if TYPE_CHECKING:
    from corral.jobs.model import QueuedOpCode

_QUEUED, _WAITING, _RUNNING = C.OP_STATUS_QUEUED, C.OP_STATUS_WAITING, C.OP_STATUS_RUNNING
_CANCELING, _CANCELED = C.OP_STATUS_CANCELING, C.OP_STATUS_CANCELED
_SUCCESS, _ERROR = C.OP_STATUS_SUCCESS, C.OP_STATUS_ERROR

OP_TRANSITIONS: Mapping[str, frozenset[str]] = {
    # Taken up (waiting for dependencies or locks), run, or ended before it
    # ran: dequeued, rejected by a filter, after a failed opcode, or when its
    # state cannot be written.
    _QUEUED: frozenset({_WAITING, _RUNNING, _CANCELING, _CANCELED, _ERROR}),
    # Back to queued when masterd restarts before it ran.
    _WAITING: frozenset({_QUEUED, _RUNNING, _CANCELING, _CANCELED, _ERROR}),
    # Back to waiting when its unit tries again with more locks (NotifyRetry).
    _RUNNING: frozenset({_WAITING, _SUCCESS, _ERROR, _CANCELING, _CANCELED}),
    # A killed opcode may still finish before the cancellation reaches it.
    _CANCELING: frozenset({_SUCCESS, _ERROR, _CANCELED}),
    # A success whose record never reached the disk ends as an error.
    _SUCCESS: frozenset({_ERROR}),
    _ERROR: frozenset(),
    _CANCELED: frozenset(),
}


def advance(op: QueuedOpCode, status: str) -> None:
    """Move ``op`` to ``status`` (staying where it is is no move)."""
    if status != op.status and status not in OP_TRANSITIONS[op.status]:
        raise errors.ProgrammerError(f"An opcode cannot go from {op.status} to {status}")
    op.status = status


def job_status(statuses: Iterable[str]) -> str:
    """A job's status from its opcodes' statuses, by Ganeti's rules: the first
    opcode that is canceling, failed or canceled decides; else the last one
    waiting or running; else queued, or success once all succeeded."""
    status = C.JOB_STATUS_QUEUED
    all_success = True
    for op_status in statuses:
        if op_status == _SUCCESS:
            continue
        all_success = False
        if op_status == _QUEUED:
            continue
        if op_status in (_WAITING, _RUNNING):
            status = op_status
            continue
        return op_status
    return C.JOB_STATUS_SUCCESS if all_success else status
