"""Faults of the master while clients work, on three candidates with the
stores in etcd (tests/helpers/etcd_cluster.py): nothing acknowledged is lost,
the register the clients share stays linearizable, a deposed master answers
nothing.

Clients, each a thread, call whichever node leads (they try the nodes in
turn) and record every call (invoke, ok, fail, unknown, with times:
tests/helpers/history.py):

- register clients write and read the watcher's pause (SetWatcherPause,
  QueryConfigValues), one key of the master's durable state;
- job clients submit tag jobs (each adds a tag of its own) and wait for them.

Faults, one after the other: kill -9 of the master's masterd, noded and etcd
member together (then started again); SIGSTOP of the master's masterd past
its lease, then SIGCONT.  Afterwards the register's history must be
linearizable (Wing & Gong / Lowe: tests/helpers/linearizability.py), every
tag job seen succeed must have its tag, and every job whose submission was
acknowledged must be known to the last master.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from corral import errors
from corral.luxi.client import Client
from tests.helpers.crash import MASTERD, kill_9
from tests.helpers.etcd_cluster import Bed, etcd_bed, etcd_pid, standby_masterd
from tests.helpers.history import History
from tests.helpers.linearizability import Register, check
from tests.helpers.noded import NODED, start_noded
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.slow

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


class NotLeading(Exception):
    """The node called does not lead (standing by, starting, gone): the call
    did nothing."""


def _call(bed: Bed, name: str, method: str, *args: Any) -> Any:
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

    def __init__(self, bed: Bed) -> None:
        self.bed = bed
        self.history = History()
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.tags_done: set[str] = set()
        self.jobs_accepted: set[int] = set()
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
                result = _call(self.bed, name, method, *args)
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
            if self._job_succeeded(job_id):
                with self._lock:
                    self.tags_done.add(tag)

    def _job_succeeded(self, job_id: int) -> bool:
        """Whether the job was seen to succeed (asking whichever node leads)."""
        while not self.stop.is_set():
            try:
                ((status,),) = self._leader_call("QueryJobs", [job_id], ["status"])
            except Exception:  # the master changes: ask again
                time.sleep(0.05)
                continue
            if status in ("success", "error", "canceled"):
                return bool(status == "success")
            time.sleep(0.02)
        return False

    def _guarded(self, body: Callable[[str], None], process: str) -> None:
        try:
            body(process)
        except BaseException as err:  # reported by the test
            self.errors.append(err)

    def start(self) -> None:
        bodies: list[tuple[Callable[[str], None], str]]
        bodies = [(self._register, f"reg{i}") for i in range(3)]
        bodies += [(self._jobs, f"job{i}") for i in range(2)]
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


def leader(bed: Bed) -> str:
    """The node whose masterd leads now (waits for one)."""
    found: list[str] = []

    def leads() -> bool:
        for name in (n.name for n in bed.nodes):
            try:
                _call(bed, name, "QueryConfigValues", ["master_node"])
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


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bed]:
    with etcd_bed(tmp_path_factory.mktemp("faults"), NAMES, *OPTIONS) as made:
        yield made


def _restart_node(bed: Bed, name: str) -> None:
    """noded (and with it the etcd member), then masterd, standing by."""
    paths = bed.paths(name)
    node = bed.node(name)
    start_noded(paths, node.node_ip, node.port)
    wait_until(lambda: etcd_pid(paths) is not None, 30, f"etcd of {name}")
    standby_masterd(bed, name, *OPTIONS)


def test_faults_of_the_master_lose_nothing_and_stay_linearizable(bed: Bed, tmp_path: Path) -> None:
    clients = Clients(bed)
    clients.start()
    try:
        wait_progress(clients, 50)
        # 1. The master's masterd, noded and etcd member die together.
        victim = leader(bed)
        paths = bed.paths(victim)
        member = etcd_pid(paths)
        assert member is not None
        for pid_file in (paths.pid_file(MASTERD), paths.pid_file(NODED)):
            kill_9(pid_file)
        os.kill(member, signal.SIGKILL)
        assert leader(bed) != victim
        wait_progress(clients, 50)
        _restart_node(bed, victim)
        wait_progress(clients, 50)
        # 2. The master's masterd freezes past its lease, then runs again.
        frozen = leader(bed)
        pid = int(bed.paths(frozen).pid_file(MASTERD).read_text())
        os.kill(pid, signal.SIGSTOP)
        try:
            wait_until(lambda: leader(bed) != frozen, TAKEOVER, "a master other than the frozen")
            wait_progress(clients, 50)
        finally:
            os.kill(pid, signal.SIGCONT)
        wait_progress(clients, 50)
    finally:
        clients.finish()
    # The frozen masterd woke up deposed: it stands by, naming the new master.
    wait_until(
        lambda: "is not the master" in bed.node(frozen).gnt("cluster", "info").stderr,
        TAKEOVER,
        "the frozen masterd standing by",
    )
    clients.history.save(tmp_path / "history.jsonl")

    verdict = check(clients.history.operations(), Register(None))
    assert verdict, verdict
    master = leader(bed)
    tags = set(_call(bed, master, "QueryTags", "cluster", ""))
    assert clients.tags_done, "no tag job succeeded"
    assert clients.tags_done <= tags, sorted(clients.tags_done - tags)
    ids = sorted(clients.jobs_accepted)
    known = _call(bed, master, "QueryJobs", ids, ["id"])
    assert [row[0] if row is not None else None for row in known] == ids
