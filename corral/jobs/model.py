"""Jobs and their opcodes as masterd holds them while they are unfinished."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from corral import constants as C
from corral.jobs.states import job_status
from corral.opcodes.base import OpCode


def split_time(ts: float | None) -> list[int] | None:
    """Ganeti's timestamp form: ``[seconds, microseconds]``."""
    if ts is None:
        return None
    sec, usec = divmod(round(ts * 1_000_000), 1_000_000)
    return [sec, usec]


@dataclass(slots=True)
class LogEntry:
    serial: int
    timestamp: float
    type: str
    message: Any

    def to_wire(self) -> list[Any]:
        return [self.serial, split_time(self.timestamp), self.type, self.message]


@dataclass(slots=True)
class QueuedOpCode:
    """One opcode of a job, with its progress."""

    input: OpCode
    status: str = C.OP_STATUS_QUEUED
    result: Any = None
    priority: int = C.OP_PRIO_NORMAL
    start_timestamp: float | None = None
    exec_timestamp: float | None = None
    end_timestamp: float | None = None

    @property
    def finished(self) -> bool:
        return self.status in C.JOB_STATUS_FINALIZED

    def stored_input(self) -> dict[str, Any]:
        """The opcode as written to disk: secret values replaced."""
        return self.input.to_dict(keep_secret=False)

    def to_store(self) -> dict[str, Any]:
        return {
            "input": self.stored_input(),
            "status": self.status,
            "result": self.result,
            "priority": self.priority,
            "start_timestamp": self.start_timestamp,
            "exec_timestamp": self.exec_timestamp,
            "end_timestamp": self.end_timestamp,
        }


@dataclass(eq=False, slots=True)
class Job:
    """An unfinished job held in memory (finished ones live only in the store)."""

    id: int
    ops: list[QueuedOpCode]
    received_timestamp: float = field(default_factory=time.time)
    start_timestamp: float | None = None
    end_timestamp: float | None = None
    log_serial: int = 0
    # Set when a cancel was asked for while the job waited or ran.
    cancel_requested: bool = False
    task: asyncio.Task[None] | None = None
    # Why the job's state could not be written (it then ends in error).
    write_error: str | None = None
    # Made only when someone waits: most jobs are never watched.
    _changed: asyncio.Event | None = None

    @property
    def status(self) -> str:
        return job_status(op.status for op in self.ops)

    @property
    def priority(self) -> int:
        return calc_priority(self.ops)

    @property
    def summary(self) -> list[str]:
        return [op.input.summary() for op in self.ops]

    def notify_change(self) -> None:
        """Wake every WaitForJobChange subscriber of this job."""
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def change_event(self) -> asyncio.Event:
        """The event set at the next change."""
        if self._changed is None:
            self._changed = asyncio.Event()
        return self._changed


def calc_priority(ops: list[QueuedOpCode]) -> int:
    """The job's priority: the highest (lowest number) of its unfinished opcodes.

    A job without unfinished opcodes has the default priority, as in luxid.
    """
    pending = [op.priority for op in ops if not op.finished]
    return min(pending, default=C.OP_PRIO_NORMAL)


@dataclass
class Unfinished:
    """The jobs masterd holds in memory (those not yet finished on disk) and
    their log entries: what the queue's parts share."""

    jobs: dict[int, Job] = field(default_factory=dict)
    logs: dict[int, list[tuple[int, LogEntry]]] = field(default_factory=dict)

    def add(self, job: Job, logs: list[tuple[int, LogEntry]] | None = None) -> None:
        self.jobs[job.id] = job
        self.logs[job.id] = logs or []

    def drop(self, job_id: int) -> None:
        self.jobs.pop(job_id, None)
        self.logs.pop(job_id, None)
