"""A random workload of concurrent clients on overlapping instance names, and
its check: no acknowledged change lost, no job acting on the wrong object.

Each client submits one job at a time (add, remove, rename, modify, start,
stop, add a tag) on a small pool of names, through its own luxi connection,
and records what masterd answered.  Two jobs that touch the same name hold
that name's lock one after the other, so ordering the successful jobs by the
moment their opcode began executing (``opexec``, once its locks were held)
gives an order in which replaying them must be possible and must end in the
cluster's actual state.  A successful job that the replay cannot apply (a
modify of a name that did not exist then) or a difference at the end is a
lost or misplaced update.

Typical use::

    report = run_workload(cl, clients=8, ops_per_client=40, seed=1)
    assert report.problems() == []
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from corral import constants as C
from corral.luxi.client import Client
from tests.helpers.cluster import TestCluster
from tests.helpers.jobs import wait_job_final

NAMES = tuple(f"w{i}.example.com" for i in range(6))
MEMORY = (128, 192, 256)
KINDS = ("add", "add", "remove", "rename", "modify", "tag", "tag", "start", "stop")
# The errors a refused job may end with: anything else is a defect.
EXPECTED_ERRORS = frozenset({"OpPrereqError"})


@dataclass
class Done:
    """One job a client submitted, and how it ended."""

    client: int
    kind: str
    name: str
    arg: Any  # new name, memory, tag or start flag
    job: int
    status: str = ""
    error: str = ""
    exec_ts: float = 0.0


def _op(kind: str, name: str, arg: Any) -> dict[str, Any]:
    if kind == "add":
        return {
            "OP_ID": "OP_INSTANCE_CREATE",
            "instance_name": name,
            "mode": "create",
            "disk_template": "file",
            "disks": [{"size": 1}],
            "nics": [],
            "no_install": True,
            "start": arg,
            "name_check": False,
            "ip_check": False,
        }
    if kind == "remove":
        return {"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": name}
    if kind == "rename":
        return {
            "OP_ID": "OP_INSTANCE_RENAME",
            "instance_name": name,
            "new_name": arg,
            "name_check": False,
            "ip_check": False,
        }
    if kind == "modify":
        return {
            "OP_ID": "OP_INSTANCE_SET_PARAMS",
            "instance_name": name,
            "beparams": {"maxmem": arg, "minmem": arg},
        }
    if kind == "tag":
        return {"OP_ID": "OP_TAGS_SET", "kind": "instance", "name": name, "tags": [arg]}
    op_id = "OP_INSTANCE_STARTUP" if kind == "start" else "OP_INSTANCE_SHUTDOWN"
    return {"OP_ID": op_id, "instance_name": name}


def _choose(rng: random.Random, client: int, seq: int) -> tuple[str, str, Any]:
    kind = rng.choice(KINDS)
    name = rng.choice(NAMES)
    arg: Any = None
    if kind == "add":
        arg = rng.random() < 0.5
    elif kind == "rename":
        arg = rng.choice([n for n in NAMES if n != name])
    elif kind == "modify":
        arg = rng.choice(MEMORY)
    elif kind == "tag":
        arg = f"c{client}-{seq}"
    return kind, name, arg


def _ended(client: Client, job: int) -> list[Any]:
    """Block until ``job`` ends; its status, opresult and opexec."""
    wait_job_final(client, job)
    return list(client.query_jobs([job], ["status", "opresult", "opexec"])[0])


def _client(cl: TestCluster, index: int, ops: int, deadline: float, seed: int,
            out: list[Done], failures: list[BaseException]) -> None:  # fmt: skip
    try:
        _client_jobs(cl, index, ops, deadline, seed, out)
    except BaseException as err:  # reported by run_workload, not lost in the thread
        failures.append(err)


def _client_jobs(cl: TestCluster, index: int, ops: int, deadline: float, seed: int,
                 out: list[Done]) -> None:  # fmt: skip
    rng = random.Random(seed * 1000 + index)
    with Client(cl.paths.master_socket, timeout=300) as client:
        seq = 0
        while seq < ops and time.monotonic() < deadline:
            kind, name, arg = _choose(rng, index, seq)
            done = Done(index, kind, name, arg, client.submit_job([_op(kind, name, arg)]))
            status, (result,), (exec_ts,) = _ended(client, done.job)
            done.status = status
            if status == C.JOB_STATUS_SUCCESS:
                done.exec_ts = exec_ts[0] + exec_ts[1] / 1e6
            elif isinstance(result, list) and result:
                done.error = f"{result[0]}: {result[1]}"
            out.append(done)
            seq += 1


@dataclass
class Model:
    """What the successful jobs, replayed in order, say each name holds."""

    instances: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def apply(self, done: Done) -> None:
        inst = self.instances.get(done.name)
        if done.kind == "add":
            if inst is not None:
                self._problem(done, "created a name that was in use")
            self.instances[done.name] = {
                "tags": set(), "maxmem": None, "admin": "up" if done.arg else "down",
            }  # fmt: skip
            return
        if inst is None:
            self._problem(done, "succeeded on a name that did not exist then")
            return
        if done.kind == "remove":
            del self.instances[done.name]
        elif done.kind == "rename":
            if done.arg in self.instances:
                self._problem(done, f"renamed onto {done.arg}, which existed")
            self.instances[done.arg] = self.instances.pop(done.name)
        elif done.kind == "modify":
            inst["maxmem"] = done.arg
        elif done.kind == "tag":
            inst["tags"].add(done.arg)
        else:
            inst["admin"] = "up" if done.kind == "start" else "down"

    def _problem(self, done: Done, what: str) -> None:
        self.problems.append(f"job {done.job} ({done.kind} {done.name} {done.arg}) {what}")


@dataclass
class Report:
    """What the clients did and what the check found."""

    done: list[Done]
    seconds: float
    model: Model
    actual: dict[str, dict[str, Any]]
    verify_rc: int
    verify_findings: list[str]

    @property
    def succeeded(self) -> int:
        return sum(d.status == C.JOB_STATUS_SUCCESS for d in self.done)

    def errors(self) -> Counter[str]:
        """How often each error class ended a job."""
        return Counter(d.error.split(":", 1)[0] for d in self.done if d.error)

    def problems(self) -> list[str]:
        """Every lost or misplaced update, unexpected error or verify finding."""
        out = list(self.model.problems)
        expected = {n: {**v, "tags": sorted(v["tags"])} for n, v in self.model.instances.items()}
        for name in sorted(set(expected) | set(self.actual)):
            want, have = expected.get(name), self.actual.get(name)
            if want is None or have is None:
                out.append(f"{name}: expected {want}, found {have}")
                continue
            for key, value in want.items():
                if value is not None and have[key] != value:
                    out.append(f"{name}: {key} is {have[key]!r}, the jobs say {value!r}")
        out += [
            f"job {d.job} ({d.kind} {d.name}) ended with {d.error}"
            for d in self.done
            if d.error and d.error.split(":", 1)[0] not in EXPECTED_ERRORS
        ]
        out += [f"job {d.job} ended {d.status}" for d in self.done if not (d.error or d.exec_ts)]
        if self.verify_rc != 0 or self.verify_findings:
            out.append(f"gnt-cluster verify: rc {self.verify_rc}, {self.verify_findings}")
        return out


def _actual(cl: TestCluster) -> dict[str, dict[str, Any]]:
    fields = ["name", "tags", "be/maxmem", "admin_state", "status"]
    with Client(cl.paths.master_socket, timeout=120) as client:
        data = client.query("instance", fields)["data"]
    out = {}
    for name, tags, maxmem, admin, status in ([cell[1] for cell in row] for row in data):
        running = status == "running"
        if running != (admin == "up"):
            admin = f"{admin} but {status}"
        out[name] = {"tags": sorted(tags), "maxmem": maxmem, "admin": admin}
    return out


def _verify(cl: TestCluster) -> tuple[int, list[str]]:
    result = cl.gnt("cluster", "verify", "--error-codes")
    findings = [
        line for line in result.stdout.splitlines() if "- ERROR" in line or "- WARN" in line
    ]
    return result.rc, findings


def run_workload(
    cl: TestCluster,
    *,
    clients: int = 8,
    ops_per_client: int = 40,
    seconds: float = 3600.0,
    seed: int = 0,
) -> Report:
    """Run the clients until each did ``ops_per_client`` jobs or ``seconds``
    passed, then check the cluster against the replay of what succeeded."""
    results: list[list[Done]] = [[] for _ in range(clients)]
    failures: list[BaseException] = []
    deadline = time.monotonic() + seconds
    start = time.monotonic()
    threads = [
        threading.Thread(
            target=_client, args=(cl, i, ops_per_client, deadline, seed, results[i], failures)
        )
        for i in range(clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    elapsed = time.monotonic() - start
    done = sorted((d for part in results for d in part), key=lambda d: d.job)
    model = Model()
    for item in sorted((d for d in done if d.exec_ts), key=lambda d: d.exec_ts):
        model.apply(item)
    rc, findings = _verify(cl)
    return Report(done, elapsed, model, _actual(cl), rc, findings)
