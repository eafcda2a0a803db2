"""Small helpers for tests that drive jobs through a real masterd.

Typical use::

    before = cluster_state(cl)
    ...                                   # something that must change nothing
    assert cluster_state(cl) == before
    rows = wait_final(cl.client(), [12, 13])
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

from corral import constants as C
from corral.luxi.client import Client
from tests.helpers.cluster import TestCluster

FINAL = frozenset(C.JOB_STATUS_FINALIZED)


def cluster_state(cl: TestCluster) -> dict[str, Any]:
    """What "nothing changed" compares: the live jobs, the config serial, the cluster."""
    with cl.client() as client:
        return {
            "jobs": client.query_jobs(None, ["id", "status"]),
            "serial": client.call("QueryConfigValues", ["config_serial"])[0],
            "info": client.call("QueryClusterInfo"),
        }


def wait_final(
    client: Client, job_ids: list[int], fields: tuple[str, ...] = ("status",), timeout: float = 30
) -> list[list[Any]]:
    """Poll QueryJobs until every job is finalized; the rows of ``fields`` (status first)."""
    wanted = ["status", *[f for f in fields if f != "status"]]
    deadline = time.monotonic() + timeout
    while True:
        rows = client.query_jobs(job_ids, wanted)
        if all(row is not None and row[0] in FINAL for row in rows):
            return rows
        if time.monotonic() > deadline:
            pending = [j for j, r in zip(job_ids, rows, strict=True) if not r or r[0] not in FINAL]
            raise AssertionError(f"jobs not final after {timeout} s: {pending[:10]}")
        time.sleep(0.05)


def wait_status(client: Client, job_id: int, statuses: set[str], timeout: float = 10) -> str:
    """Poll until the job has one of ``statuses``; returns it."""
    deadline = time.monotonic() + timeout
    while True:
        (row,) = client.query_jobs([job_id], ["status"])
        if row is not None and row[0] in statuses:
            return str(row[0])
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} is {row}, not one of {sorted(statuses)}")
        time.sleep(0.02)


def wait_new_job(client: Client, known: set[int], timeout: float = 30) -> int:
    """Poll until a job that is not in ``known`` exists; its id."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        new = {row[0] for row in client.query_jobs(None, ["id"])} - known
        if new:
            return int(min(new))
        time.sleep(0.02)
    raise AssertionError(f"no new job within {timeout} s")


def delay_gate_path(client: Client, job_id: int, timeout: float = 30) -> str:
    """The socket of an interruptible OP_TEST_DELAY, once the job has logged it
    (followed with WaitForJobChange, as a client follows a job)."""
    info, serial, deadline = None, 0, time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = client.wait_for_job_change(job_id, ["status"], info, serial, 5)
        if result is None:
            raise AssertionError(f"job {job_id} not found")
        if result == "nochange":
            continue
        info = result[0]
        for entry_serial, _ts, kind, message in result[1]:
            serial = max(serial, entry_serial)
            if kind == C.ELOG_DELAY_TEST:
                return str(message[0])
    raise AssertionError(f"job {job_id} logged no delay-test socket in {timeout} s")


def release_gate(path: str) -> None:
    """End an interruptible delay: connect to its socket, then close."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(path)


class RawLuxi:
    """A luxi connection that sends bytes exactly as given (for malformed frames)."""

    def __init__(self, path: Path, timeout: float = 10) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self._buffer = b""

    def exchange(self, frame: bytes) -> bytes:
        """Send ``frame`` as is and return the next answer (without the terminator)."""
        self.sock.sendall(frame)
        while b"\x03" not in self._buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("masterd closed the connection")
            self._buffer += chunk
        answer, _, self._buffer = self._buffer.partition(b"\x03")
        return answer

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawLuxi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_job_final(client: Client, job_id: int, timeout: float = 600) -> str:
    """Block until one job has a final status (WaitForJobChange, no polling); returns it."""
    deadline = time.monotonic() + timeout
    prev: Any = None
    serial = 0  # the last log entry seen: entries already seen do not wake us again
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"job {job_id} still unfinished")
        result = client.wait_for_job_change(
            job_id, ["status"], prev, serial, min(remaining, C.LUXI_WFJC_TIMEOUT)
        )
        if result == "nochange":
            continue
        prev, log = result
        serial = max([serial, *(entry[0] for entry in log or [])])
        if prev[0] in FINAL:
            return str(prev[0])
