"""Clients of a cluster whose master suffers faults, and the faults
(tests/integration/test_mastership_faults.py, bench/bench_mastership_faults.py;
on nodes in network namespaces: tests/helpers/netns_etcd.py).

Clients, each a thread, call whichever node leads (they try the last leader
first, then the others) and record every call (invoke, ok, fail, unknown,
with times: tests/helpers/history.py):

- register clients write and read the watcher's pause (SetWatcherPause,
  QueryConfigValues), one key of the master's durable state;
- job clients submit tag jobs (each adds a tag of its own) and wait for them.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from corral import errors
from corral.luxi.client import Client
from corral.paths import Paths
from tests.helpers.crash import MASTERD, kill_9
from tests.helpers.etcd_cluster import Bed, etcd_pid, standby_masterd
from tests.helpers.history import History
from tests.helpers.linearizability import Register, Verdict, check
from tests.helpers.noded import NODED, start_noded
from tests.helpers.waiting import wait_until

NAMES = ("node2.example.com", "node3.example.com")
LEASE_TTL = 3.0
OPTIONS = ("--lease-ttl", str(LEASE_TTL), "--etcd-check-interval", "1")
REGISTER = "watcher_pause"
# Values written to the register: distinct times far in the future.
FUTURE = 4102444800
# Seconds a new master may take after a fault (the lease, an election, a start).
TAKEOVER = 60.0
# Seconds a client waits for an answer (a frozen master takes calls, answers none).
CALL_TIMEOUT = 5.0


class Named(Protocol):
    @property
    def name(self) -> str: ...


class FaultBed(Protocol):
    """A bed whose candidates' masterds the clients call: the loopback one
    (tests/helpers/etcd_cluster.py) or the namespaces one (tests/helpers/netns_etcd.py)."""

    @property
    def nodes(self) -> Sequence[Named]:
        """The master candidates (each runs masterd)."""
        ...

    def paths(self, name: str) -> Paths:
        """Node ``name``'s root (its luxi socket, pid files, logs)."""
        ...


class NotLeading(Exception):
    """The node called does not lead (standing by, starting, gone): the call
    did nothing."""


def call(bed: FaultBed, name: str, method: str, *args: Any) -> Any:
    """One luxi call to node ``name``'s masterd.  NotLeading if it certainly did
    nothing; any other exception leaves its effect unknown."""
    client = Client(bed.paths(name).master_socket, timeout=CALL_TIMEOUT)
    try:
        try:
            client.connect()
        except errors.NoMasterError as err:
            raise NotLeading(str(err)) from None
        try:
            return client.call(method, *args)
        except errors.OpPrereqError as err:
            # A standby's answer, or a master whose lease ran out: before anything.
            if "is not the master" in str(err) or "lease ran out" in str(err):
                raise NotLeading(str(err)) from None
            raise
    finally:
        client.close()


class Clients:
    """The client threads and their history."""

    def __init__(self, bed: FaultBed) -> None:
        self.bed = bed
        self.history = History()
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.tags_done: set[str] = set()
        self.jobs_accepted: set[int] = set()
        self.jobs_ended: dict[int, str] = {}  # the final status a client saw
        self._values = itertools.count(FUTURE)
        self._leader = bed.nodes[0].name  # a hint: who led at the last call
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def _leader_call(self, method: str, *args: Any) -> Any:
        """The call, made to each node in turn (the last one that led first)
        until one leads (NotLeading if none does now)."""
        names = [n.name for n in self.bed.nodes]
        first = names.index(self._leader)
        for index, name in enumerate(names[first:] + names[:first]):
            try:
                result = call(self.bed, name, method, *args)
            except NotLeading:
                continue
            except Exception:  # no answer (frozen, killed): try the others first next time
                self._leader = names[(first + index + 1) % len(names)]
                raise
            self._leader = name
            return result
        raise NotLeading("no node leads now")

    def _register(self, base: str) -> None:
        # A call whose outcome is unknown may still take effect at any time:
        # as Jepsen's, the client goes on as a new process.
        incarnation = 0
        for round_ in itertools.count():
            if self.stop.is_set():
                return
            process = f"{base}.{incarnation}"
            try:
                if round_ % 2 == 0:
                    self._write(process)
                else:
                    self._read(process)
            except Exception:  # recorded as unknown
                incarnation += 1

    def _write(self, process: str) -> None:
        with self._lock:
            value = next(self._values)
        with self.history.call(process, REGISTER, "write", (NotLeading,), value=value) as call:
            self._leader_call("SetWatcherPause", value)
            call.ok()

    def _read(self, process: str) -> None:
        with self.history.call(process, REGISTER, "read", (NotLeading,)) as call:
            (value,) = self._leader_call("QueryConfigValues", [REGISTER])
            call.ok(value)

    def _jobs(self, process: str) -> None:
        for number in itertools.count():
            if self.stop.is_set():
                return
            tag = f"{process}-{number}"
            op = {"OP_ID": "OP_TAGS_SET", "kind": "cluster", "tags": [tag]}
            try:
                job_id = int(self._leader_call("SubmitJob", [op]))
            except Exception:  # not accepted, or not known whether: nothing to check
                continue
            with self._lock:
                self.jobs_accepted.add(job_id)
            status = self._job_end(job_id)
            with self._lock:
                if status is not None:
                    self.jobs_ended[job_id] = status
                if status == "success":
                    self.tags_done.add(tag)

    def _job_end(self, job_id: int) -> str | None:
        """The job's final status (asking whichever node leads; None: the
        clients stopped first)."""
        while not self.stop.is_set():
            try:
                ((status,),) = self._leader_call("QueryJobs", [job_id], ["status"])
            except Exception:  # the master changes: ask again
                time.sleep(0.05)
                continue
            if status in ("success", "error", "canceled"):
                return str(status)
            time.sleep(0.02)
        return None

    def _guarded(self, body: Callable[[str], None], process: str) -> None:
        try:
            body(process)
        except BaseException as err:  # reported by the test
            self.errors.append(err)

    def start(self, registers: int = 3, jobs: int = 2) -> None:
        """Start ``registers`` register clients and ``jobs`` job clients."""
        bodies: list[tuple[Callable[[str], None], str]]
        bodies = [(self._register, f"reg{i}") for i in range(registers)]
        bodies += [(self._jobs, f"job{i}") for i in range(jobs)]
        for body, process in bodies:
            thread = threading.Thread(target=self._guarded, args=(body, process), daemon=True)
            thread.start()
            self._threads.append(thread)

    def finish(self) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(60)
        assert not self.errors, self.errors

    def progress(self) -> int:
        """Calls that ended so far."""
        return sum(1 for event in self.history.events() if event["type"] != "invoke")


def leader(bed: FaultBed) -> str:
    """The node whose masterd leads now (waits for one)."""
    found: list[str] = []

    def leads() -> bool:
        for name in (n.name for n in bed.nodes):
            try:
                call(bed, name, "QueryConfigValues", ["master_node"])
            except Exception:
                continue
            found[:] = [name]
            return True
        return False

    wait_until(leads, TAKEOVER, "a master")
    return found[0]


def wait_progress(clients: Clients, calls: int) -> None:
    """Until the clients made ``calls`` more calls."""
    target = clients.progress() + calls
    wait_until(lambda: clients.progress() >= target, TAKEOVER, f"{calls} more calls")


def restart_node(bed: Bed, name: str) -> None:
    """noded (and with it the etcd member), then masterd, standing by."""
    paths = bed.paths(name)
    node = bed.node(name)
    start_noded(paths, node.node_ip, node.port)
    wait_until(lambda: etcd_pid(paths) is not None, 30, f"etcd of {name}")
    standby_masterd(bed, name, *OPTIONS)


def kill_node(bed: FaultBed, name: str) -> None:
    """kill -9 of node ``name``'s masterd, noded and etcd member together."""
    paths = bed.paths(name)
    member = etcd_pid(paths)
    assert member is not None
    for pid_file in (paths.pid_file(MASTERD), paths.pid_file(NODED)):
        kill_9(pid_file)
    os.kill(member, signal.SIGKILL)


def kill_master_node(bed: FaultBed) -> tuple[str, float]:
    """kill -9 of the master's masterd, noded and etcd member together (see
    :func:`restart_node`); the node, and the seconds from the kill to another
    node leading."""
    victim = leader(bed)
    start = time.monotonic()
    kill_node(bed, victim)
    new = leader(bed)
    taken = time.monotonic() - start
    assert new != victim
    return victim, taken


@contextlib.contextmanager
def frozen_master(bed: FaultBed) -> Iterator[tuple[str, float]]:
    """The master's masterd stopped (SIGSTOP) until another node leads, then
    for the block; continued (SIGCONT) after.  The node, and the seconds from
    the freeze to another node leading."""
    frozen = leader(bed)
    pid = int(bed.paths(frozen).pid_file(MASTERD).read_text())
    start = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_until(lambda: leader(bed) != frozen, TAKEOVER, "a master other than the frozen")
        yield frozen, time.monotonic() - start
    finally:
        os.kill(pid, signal.SIGCONT)


@dataclass
class Outcome:
    """What the clients' calls say once the faults are over."""

    verdict: Verdict
    tags_lost: list[str] = field(default_factory=list)
    jobs_unknown: list[int] = field(default_factory=list)
    tags_done: int = 0
    # Jobs whose final status, as the last master has it, is not the one a client saw.
    jobs_changed: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        lost = self.tags_lost or self.jobs_unknown or self.jobs_changed
        return bool(self.verdict) and not lost


def outcome(bed: FaultBed, clients: Clients) -> Outcome:
    """Check the register's history, the tags of the jobs seen to succeed, and
    that the master knows every job whose submission was acknowledged, with
    the final status a client saw it end with."""
    verdict = check(clients.history.operations(), Register(None))
    master = leader(bed)
    tags = set(call(bed, master, "QueryTags", "cluster", ""))
    ids = sorted(clients.jobs_accepted)
    known = call(bed, master, "QueryJobs", ids, ["id", "status"])
    unknown = [i for i, row in zip(ids, known, strict=True) if row is None or row[0] != i]
    now = {row[0]: row[1] for row in known if row is not None}
    changed = sorted(i for i, status in clients.jobs_ended.items() if now.get(i) != status)
    lost = sorted(clients.tags_done - tags)
    return Outcome(verdict, lost, unknown, len(clients.tags_done), changed)
