"""Submitting several jobs and following them, as Ganeti's JobExecutor does.

Used where a command acts on many items (``gnt-instance startup a b``):
the jobs go in one SubmitManyJobs; then each is waited for in turn, the
running ones first, with ``Waiting for job N for NAME ...`` before its log.
"""

from __future__ import annotations

import argparse
import sys

from corral import constants as C
from corral import errors
from corral.cli import common
from corral.cli.errors_fmt import format_error
from corral.luxi.client import Client

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

# How many pending jobs are looked at to find one that already runs.
_CHOOSE_BATCH = 25
_WAITING = (C.JOB_STATUS_QUEUED, C.JOB_STATUS_WAITING, C.JOB_STATUS_CANCELING)


class _Submitted:
    """A job of the executor: its place in the queue, and whether it was accepted."""

    __slots__ = ("job", "name", "ok", "position")

    def __init__(self, position: int, ok: bool, job: Any, name: str | None) -> None:
        self.position = position
        self.ok = ok
        self.job = job  # the job id, or the reason the submission failed
        self.name = name


class JobExecutor:
    """Jobs queued with ``queue_job``, submitted and followed by ``wait_or_show``.

    (Plain classes here: dataclasses or NamedTuple cost the commands milliseconds
    of start-up.)
    """

    def __init__(self, client: Client, opts: argparse.Namespace, verbose: bool = True) -> None:
        self.client = client
        self.opts = opts
        self.verbose = verbose
        self._queued: list[tuple[int, str | None, list[dict[str, Any]]]] = []
        self._jobs: list[_Submitted] = []

    def queue_job(self, name: str | None, *ops: dict[str, Any]) -> None:
        generic = common.common_op_fields(self.opts)
        self._queued.append((len(self._queued), name, [{**generic, **op} for op in ops]))

    def add_job_id(self, name: str | None, ok: bool, job: Any) -> None:
        """Follow a job submitted elsewhere (``job``: its id, or why it failed)."""
        self._jobs.append(_Submitted(len(self._queued) + len(self._jobs), ok, job, name))

    def submit_pending(self, each: bool = False) -> None:
        """Submit the queued jobs: in one SubmitManyJobs, or ``each`` on its own."""
        if each:
            results = [[True, self.client.submit_job(ops)] for _, _, ops in self._queued]
        else:
            results = self.client.submit_many_jobs([ops for _, _, ops in self._queued])
        for (ok, job), (index, name, _) in zip(results, self._queued, strict=True):
            self._jobs.append(_Submitted(index, bool(ok), job, name))

    @staticmethod
    def _for(name: str | None) -> str:
        return f" for {name}" if name else ""

    def _choose(self) -> _Submitted:
        """A job that no longer waits in the queue, else the first one."""
        batch = self._jobs[:_CHOOSE_BATCH]
        rows = self.client.query_jobs([j.job for j in batch], ["status"])
        for job, row in zip(batch, rows, strict=True):
            if row and row[0] in _WAITING:
                continue
            self._jobs.remove(job)
            return job
        return self._jobs.pop(0)

    def get_results(self) -> list[tuple[bool, Any]]:
        """Wait for every job; ``(success, result or error text)`` in queued order."""
        if not self._jobs:
            self.submit_pending()
        results: list[tuple[int, bool, Any]] = []
        submitted = [j for j in self._jobs if j.ok]
        if self.verbose and submitted:
            print(f"Submitted jobs {', '.join(str(j.job) for j in submitted)}")
        for job in [j for j in self._jobs if not j.ok]:
            print(f"Failed to submit job{self._for(job.name)}: {job.job}", file=sys.stderr)
            results.append((job.position, False, job.job))
        self._jobs = submitted
        while self._jobs:
            job = self._choose()
            print(f"Waiting for job {job.job}{self._for(job.name)} ...", flush=True)
            results.append((job.position, *self._follow(job)))
        results.sort(key=lambda r: r[0])
        return [(ok, result) for _, ok, result in results]

    def _follow(self, job: _Submitted) -> tuple[bool, Any]:
        try:
            return True, common.poll_job(self.client, int(job.job))
        except errors.JobLost as err:
            _, text = format_error(err)
            print(
                f"Job {job.job}{self._for(job.name)} has been archived, cannot check its result",
                file=sys.stderr,
            )
            return False, text
        except errors.GenericError as err:
            _, text = format_error(err)
            print(f"Job {job.job}{self._for(job.name)} has failed: {text}", file=sys.stderr)
            return False, text

    def wait_or_show(self, wait: bool) -> list[tuple[bool, Any]]:
        """Wait for the jobs, or (``--submit``) print their ids and names."""
        if wait:
            return self.get_results()
        if not self._jobs:
            self.submit_pending()
        for job in self._jobs:
            if job.ok:
                print(f"{job.job}: {job.name}")
            else:
                print(f"Failure for {job.name}: {job.job}", file=sys.stderr)
        return [(job.ok, job.job) for job in self._jobs]


# The key of the job ids in the result of an opcode that submits jobs.
JOB_IDS_KEY = "jobs"


def follow_result_jobs(opts: argparse.Namespace, result: Any) -> int:
    """Wait for the jobs an opcode's result names (Ganeti's GetResult); the
    exit code: failure if one of them failed."""
    if not (isinstance(result, dict) and JOB_IDS_KEY in result):
        return C.EXIT_SUCCESS
    jex = JobExecutor(common.get_client(), opts)
    for ok, job_id in result[JOB_IDS_KEY]:
        jex.add_job_id(None, ok, job_id)
    return C.EXIT_FAILURE if any(not ok for ok, _ in jex.get_results()) else C.EXIT_SUCCESS
