"""Taking uids from the pool on a node: real lock files, real processes
running under the uids (``sleep`` started with ``user=``), real concurrent
takers (threads, asyncio tasks, processes).  Needs root, as noded does."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral import errors
from corral.node import uidpool as U
from corral.paths import Paths
from tests.helpers.noded import REPO_ROOT

EXHAUSTED = (
    "No free uid left in the cluster's uid pool ({} uids, all in use);"
    " add uids with gnt-cluster modify --add-uids or stop an instance"
)


def make_pool(root: Path, pool: str, lock_dir: Path | None = None) -> U.UidPool:
    """A node under ``root`` whose ssconf file has the pool ``pool`` (ssconf text)."""
    paths = Paths(root)
    paths.data_dir.mkdir(parents=True, exist_ok=True)
    paths.ssconf_file("uid_pool").write_text(pool + "\n")
    return U.UidPool(paths, lock_dir)


@pytest.fixture
def base() -> int:
    """The first of 100 uids no process runs under (high ones, picked at random)."""
    start = random.randrange(2_000_000_000, 2_100_000_000, 100)
    assert not U.process_uids() & set(range(start, start + 100))
    return start


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes the test starts; ended (by pid) and waited for afterwards."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def sleep_as(uid: int, sleepers: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(["sleep", "infinity"], user=uid)
    sleepers.append(proc)
    return proc


def end(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def test_two_takes_then_exhausted(tmp_path: Path, base: int) -> None:
    pool = make_pool(tmp_path, f"{base}-{base + 1}")
    first, second = pool.take_now("inst1"), pool.take_now("inst2")
    assert {first.uid, second.uid} == {base, base + 1}
    with pytest.raises(errors.LockError) as refused:
        pool.take_now("inst3")
    assert refused.value.message == EXHAUSTED.format(2)
    first.release()
    assert pool.take_now("inst3").uid == first.uid
    pool.release(second.uid)  # by number, as after a failed start
    assert pool.take_now("inst4").uid == second.uid


def test_empty_pool(tmp_path: Path) -> None:
    pool = U.UidPool(Paths(tmp_path))
    with pytest.raises(errors.LockError, match="The cluster's uid pool is empty; set one with"):
        pool.take_now("inst1")


def test_overlapping_ranges_count_each_uid_once(tmp_path: Path, base: int) -> None:
    pool = make_pool(tmp_path, f"{base}-{base + 2}\n{base + 1}-{base + 3}\n{base + 2}")
    taken = {pool.take_now(f"inst{n}").uid for n in range(4)}
    assert taken == set(range(base, base + 4))
    with pytest.raises(errors.LockError, match=r"\(4 uids, all in use\)"):
        pool.take_now("inst5")


def test_whole_uid_space(tmp_path: Path) -> None:
    """A pool of every 32-bit uid is walked lazily, never expanded."""
    pool = make_pool(tmp_path, "0-4294967295")
    taken = pool.take_now("inst1")
    assert taken.uid not in U.process_uids()
    taken.release()


def test_a_uid_a_process_runs_under_is_not_handed_out(
    tmp_path: Path, base: int, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    pool = make_pool(tmp_path, str(base))
    stranger = sleep_as(base, sleepers)
    assert U.uid_has_process(base)
    with pytest.raises(errors.LockError, match=r"\(1 uids, all in use\)"):
        pool.take_now("inst1")
    assert pool.owner_of(base) is None  # not taken through the pool
    assert pool.in_use() == {base: None}
    end(stranger)
    assert pool.take_now("inst1").uid == base


def test_instance_lifecycle(
    tmp_path: Path, base: int, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    """Taken at start, kept by the running process once the lock is dropped,
    free again when the process is gone; the owner is known meanwhile."""
    pool = make_pool(tmp_path, f"{base}-{base + 1}")
    taken = pool.take_now("inst1")
    qemu = sleep_as(taken.uid, sleepers)
    taken.started()
    other = pool.take_now("inst2")
    assert other.uid != taken.uid
    other.release()
    assert pool.owner_of(taken.uid) == "inst1"
    assert pool.in_use() == {taken.uid: "inst1"}
    end(qemu)
    pool.release(taken.uid)
    assert pool.owner_of(taken.uid) is None
    assert pool.in_use() == {}
    assert (pool.lock_dir / str(taken.uid)).read_text() == ""


async def test_running_with(
    tmp_path: Path, base: int, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    """Ganeti's ExecWithUnusedUid: a failed start gives the uid back, a
    successful one leaves it taken by the process."""
    pool = make_pool(tmp_path, str(base))
    with pytest.raises(RuntimeError):
        async with pool.running_with("inst1") as uid:
            raise RuntimeError("QEMU did not start")
    async with pool.running_with("inst1") as uid:
        sleep_as(uid, sleepers)
    with pytest.raises(errors.LockError, match="all in use"):
        await pool.take("inst2")
    assert pool.owner_of(uid) == "inst1"


# A taker in a process of its own (a noded): when told to, takes ``count``
# uids or as many as it can, reports them, then holds them until its standard
# input closes (or it is killed).
_TAKER = r"""
import sys
from pathlib import Path
from corral import errors
from corral.node.uidpool import UidPool
from corral.paths import Paths

root, lock_dir, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
pool = UidPool(Paths(Path(root)), Path(lock_dir))
print("ready", flush=True)
sys.stdin.readline()
uids = []
for n in range(count):
    try:
        uids.append(pool.take_now(f"inst{n}").uid)
    except errors.LockError:
        break
print(" ".join(map(str, uids)), flush=True)
sys.stdin.read()
"""


def start_taker(pool: U.UidPool, count: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    args = [str(pool.paths.root), str(pool.lock_dir), str(count)]
    proc = subprocess.Popen(
        [sys.executable, "-c", _TAKER, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def send_go(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()


def taken_by(proc: subprocess.Popen[str]) -> list[int]:
    """The uids the taker reports it took."""
    assert proc.stdout is not None
    return [int(uid) for uid in proc.stdout.readline().split()]


@pytest.fixture
def takers() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


def test_a_taker_killed_mid_start_frees_the_uid(
    tmp_path: Path, base: int, takers: list[subprocess.Popen[str]]
) -> None:
    pool = make_pool(tmp_path, str(base))
    takers.append(start_taker(pool, 1))
    send_go(takers[0])
    assert taken_by(takers[0]) == [base]
    with pytest.raises(errors.LockError, match="all in use"):
        pool.take_now("inst2")  # its lock is held: a start in progress
    end(takers[0])  # noded dies before the instance runs: the kernel drops the lock
    assert pool.take_now("inst2").uid == base


def test_a_uid_outlives_the_taker(
    tmp_path: Path,
    base: int,
    takers: list[subprocess.Popen[str]],
    sleepers: list[subprocess.Popen[bytes]],
) -> None:
    """noded dies while the instances run: their uids stay taken by their
    processes (nothing to clean up), and are free once those are gone."""
    pool = make_pool(tmp_path, f"{base}-{base + 1}")
    takers.append(start_taker(pool, 2))
    send_go(takers[0])
    uids = taken_by(takers[0])
    assert sorted(uids) == [base, base + 1]
    instances = [sleep_as(uid, sleepers) for uid in uids]
    end(takers[0])
    with pytest.raises(errors.LockError, match="all in use"):
        pool.take_now("inst3")
    assert pool.in_use() == {uids[0]: "inst0", uids[1]: "inst1"}
    for proc in instances:
        end(proc)
    assert {pool.take_now("a").uid, pool.take_now("b").uid} == {base, base + 1}


def test_concurrent_threads(tmp_path: Path, base: int) -> None:
    pool = make_pool(tmp_path, f"{base}-{base + 15}")
    barrier = threading.Barrier(48)
    results: list[int | str] = []

    def take(n: int) -> None:
        barrier.wait()
        try:
            results.append(pool.take_now(f"inst{n}").uid)
        except errors.LockError as err:
            results.append(err.message)

    threads = [threading.Thread(target=take, args=(n,)) for n in range(48)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    uids = [r for r in results if isinstance(r, int)]
    assert sorted(uids) == list(range(base, base + 16))
    assert [r for r in results if isinstance(r, str)] == [EXHAUSTED.format(16)] * 32


async def test_concurrent_tasks(tmp_path: Path, base: int) -> None:
    pool = make_pool(tmp_path, f"{base}-{base + 9}")
    results = await asyncio.gather(
        *(pool.take(f"inst{n}") for n in range(12)), return_exceptions=True
    )
    uids = [r.uid for r in results if isinstance(r, U.TakenUid)]
    assert sorted(uids) == list(range(base, base + 10))
    assert sum(isinstance(r, errors.LockError) for r in results) == 2


def test_concurrent_processes(
    tmp_path: Path, base: int, takers: list[subprocess.Popen[str]]
) -> None:
    """Four noded on one machine, sharing the lock directory, each with a root
    of its own: no uid is handed out twice."""
    lock_dir = tmp_path / "locks"
    pools = [make_pool(tmp_path / f"node{n}", f"{base}-{base + 19}", lock_dir) for n in range(4)]
    takers += [start_taker(pool, 10) for pool in pools]
    for taker in takers:
        send_go(taker)
    every = [uid for taker in takers for uid in taken_by(taker)]
    assert sorted(every) == list(range(base, base + 20))


def test_lock_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = Paths(tmp_path)
    assert U.UidPool(paths).lock_dir == tmp_path / "var/run/ganeti/uid-pool"
    monkeypatch.setenv(U.LOCK_DIR_ENV, str(tmp_path / "shared"))
    assert U.UidPool(paths).lock_dir == tmp_path / "shared"


def test_a_zombie_holds_no_uid(
    tmp_path: Path, base: int, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    # A dead process nobody has reaped yet (a daemonized QEMU whose new parent,
    # a container's init, reaps late) must not keep its uid taken.
    pool = make_pool(tmp_path, f"{base}-{base}")
    proc = sleep_as(base, sleepers)
    assert U.uid_has_process(base)
    os.kill(proc.pid, signal.SIGKILL)
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # dead, not reaped: a zombie
    assert not U.uid_has_process(base)
    assert pool.take_now("inst1").uid == base
