"""kvm guests (issue 11): start-up against QEMU started by hand, and the
daemons' CPU use while guests idle.

Both figures run on a real single-node cluster whose only hypervisor is kvm
(``--enabled-hypervisors=kvm``), with the test guests of ``tests/helpers/guest.py``
(Debian's cloud kernel, a busybox initramfs, direct kernel boot, TCG: the
``/dev/kvm`` of this machine kind hangs stock kernels), 128 MiB, no disk, no
NIC; the cluster lives under a short ``/tmp/kb*`` root (QEMU's socket paths).

* **Start-up** (median of the per-run ratios Corral / by hand, target ≤ 1.10):
  Corral's time runs from just before a fresh ``<venv>/bin/python -m
  corral.cli.gnt_instance startup INSTANCE`` is forked to the guest's
  ``CORRAL-GUEST-UP`` line on its serial console.  The baseline runs QEMU by
  hand with the argv Corral used (read from the instance's runtime file), only
  its pidfile and QMP/serial socket paths moved to a directory of its own, so
  with the same ``-daemonize -S``: from just before QEMU is forked, wait for
  its parent to exit, connect to QMP, ``query-status`` and ``cont`` (what
  noded does), to the same line.  Both consoles are caught the same way: an
  inotify watch sees the socket created and a thread connects at once
  (``bench/kvm_serial.py``), before ``cont`` lets the guest print.  A warm-up
  round is dropped; the order of the two alternates between runs; only one
  guest runs at a time.
* **Idle CPU** (median over ``--runs`` windows of ``--idle-seconds``, target
  ≤ 1 % of one core): 10 guests started and idle (shell and acpid, no
  counter; each one's ``CORRAL-GUEST-READY`` seen), then the CPU time
  (``/proc/<pid>/stat`` utime + stime, pids from the daemons' pid files) that
  corral-masterd and corral-noded use together over each window.  What their
  waited-for children used, corral-rapi's share and the QEMU processes' own
  CPU (TCG idles at some per cent) are recorded for information.

Ganeti 3.0.2: not measured (no Ganeti kvm cluster on this machine kind).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from qemu.qmp import QMPClient, QMPError

from bench.common import (
    PYTHON,
    Figure,
    against_by_hand,
    arg_parser,
    ensure_bytecode,
    median,
    submit_many,
    wait_all_final,
    write_results,
)
from bench.kvm_serial import SocketWatch
from corral.node.hypervisor.kvm.runtime import Layout
from tests.helpers.cluster import TestCluster
from tests.helpers.kvm_guest import MARKER, kvm_cluster

NAME = "kvm"
READY = "CORRAL-GUEST-READY"
IDLE_GUESTS = 10
IDLE_SECONDS = 60.0
GUEST = "boot1"
DAEMONS = ("corral-masterd", "corral-noded")
INFO_DAEMONS = ("corral-rapi",)
TICKS = os.sysconf("SC_CLK_TCK")
WAIT = 300.0  # ten TCG guests booting at once on two cores take a while


def gnt(cluster: TestCluster, *args: str) -> None:
    result = cluster.gnt(*args, timeout=WAIT)
    if result.rc != 0:
        raise RuntimeError(f"gnt-{' '.join(args)} failed: {result.stderr}")


def add_guest(cluster: TestCluster, name: str) -> None:
    gnt(cluster, "instance", "add", "--no-name-check", "--no-ip-check", "-t", "diskless",
        "-o", "tiny+default", "--no-nics", "-B", "memory=128", "--no-start", name)  # fmt: skip


# Start-up
def by_hand_argv(argv: list[str], layout: Layout, name: str, hand: Path) -> list[str]:
    """Corral's argv with its pidfile and sockets moved to ``hand``."""
    moves = {
        str(layout.pidfile(name)): str(hand / "pid"),
        str(layout.qmp(name)): str(hand / f"{name}.qmp"),
        str(layout.serial(name)): str(hand / f"{name}.serial"),
    }
    joined = "\0".join(argv)
    for old, new in moves.items():
        if joined.count(old) != 1:
            raise RuntimeError(f"{old} is not once in Corral's argv: {argv}")
        joined = joined.replace(old, new)
    return joined.split("\0")


def warm_up(cluster: TestCluster, watch: SocketWatch) -> list[str]:
    """Start and stop the guest once (noded learns QEMU's default machine);
    returns the argv Corral ran it with."""
    session = watch.expect(GUEST)
    gnt(cluster, "instance", "startup", GUEST)
    runtime = Layout(cluster.paths.run_dir).read_runtime(GUEST)
    session.wait_for(MARKER, WAIT)
    gnt(cluster, "instance", "shutdown", "--timeout=0", GUEST)
    session.wait_closed(WAIT)
    if runtime is None:
        raise RuntimeError(f"{GUEST} has no runtime file while running")
    return runtime.argv


def time_corral(cluster: TestCluster, watch: SocketWatch, name: str) -> tuple[float, float]:
    """Seconds from forking ``gnt-instance startup`` to the marker, and to its exit."""
    session = watch.expect(name)
    start = time.perf_counter()
    proc = subprocess.run(
        [PYTHON, "-m", "corral.cli.gnt_instance", "startup", name],
        env=cluster.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    returned = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"gnt-instance startup failed: {proc.stderr.decode()}")
    marker = session.wait_for(MARKER, WAIT) - start
    gnt(cluster, "instance", "shutdown", "--timeout=0", name)
    session.wait_closed(WAIT)
    return marker, returned


async def time_by_hand(
    argv: list[str],
    watch: SocketWatch,
    name: str,
    hand: Path,
    marker: str = MARKER,
    timeout: float = WAIT,
) -> float:
    """Seconds from forking QEMU (as Corral runs it) to ``marker``."""
    session = watch.expect(name)
    start = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()  # -daemonize: the parent exits once QEMU is set up
    if proc.returncode != 0:
        raise RuntimeError(f"QEMU by hand failed: {out.decode(errors='replace')}")
    qmp = QMPClient(name)
    try:
        await qmp.connect(str(hand / f"{name}.qmp"))
        await qmp.execute("query-status")
        await qmp.execute("cont")
        seen = await asyncio.to_thread(session.wait_for, marker, timeout)
        await qmp.execute("quit")
    finally:
        with contextlib.suppress(QMPError, OSError, EOFError):
            await qmp.disconnect()
    await asyncio.to_thread(session.wait_closed, timeout)  # QEMU is gone
    return seen - start


def one_round(
    run: int, cluster: TestCluster, watches: tuple[SocketWatch, SocketWatch], argv: list[str]
) -> tuple[float, float, float]:
    """Corral's time to the marker, its gnt's exit, and the by-hand time;
    which side goes first alternates with ``run``."""
    corral_watch, hand_watch = watches
    hand = hand_watch.directory
    if run % 2:
        corral, returned = time_corral(cluster, corral_watch, GUEST)
        by_hand = asyncio.run(time_by_hand(argv, hand_watch, GUEST, hand))
    else:
        by_hand = asyncio.run(time_by_hand(argv, hand_watch, GUEST, hand))
        corral, returned = time_corral(cluster, corral_watch, GUEST)
    print(
        f"run {run + 1}: Corral {corral:.3f} s (gnt returned {returned:.3f} s),"
        f" by hand {by_hand:.3f} s, ratio {corral / by_hand:.3f}",
        flush=True,
    )
    return corral, returned, by_hand


def kill_by_hand(hand: Path) -> None:
    """SIGKILL the by-hand QEMU if a failed run left it running."""
    try:
        pid = int((hand / "pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ValueError):
        return
    if os.fsencode(hand) in cmdline:  # ours, not a reused pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def startup(args: argparse.Namespace) -> tuple[Figure, dict[str, Any]]:
    figure = Figure(
        "kvm_startup_ratio",
        "gnt-instance startup to serial marker / QEMU by hand",
        "x",
        1.10,
        "max",
        "not measured",
    )
    samples: list[tuple[float, float, float]] = []
    with kvm_cluster("kb") as cluster:
        add_guest(cluster, GUEST)
        layout = Layout(cluster.paths.run_dir)
        layout.ensure()  # noded makes it at its first start: watched before that
        hand = Path(tempfile.mkdtemp(prefix="kh", dir="/tmp"))
        watches = (SocketWatch(layout.base / "ctrl"), SocketWatch(hand))
        try:
            argv = by_hand_argv(warm_up(cluster, watches[0]), layout, GUEST, hand)
            asyncio.run(time_by_hand(argv, watches[1], GUEST, hand))  # warm-up
            samples = [one_round(run, cluster, watches, argv) for run in range(args.runs)]
        finally:
            for watch in watches:
                watch.close()
            kill_by_hand(hand)
            shutil.rmtree(hand, ignore_errors=True)
    corral, returned, by_hand = (list(column) for column in zip(*samples, strict=True))
    extra = {
        **against_by_hand(figure, corral, by_hand),
        "gnt_returned_s": [round(t, 3) for t in returned],
        "overhead_median_s": round(
            median([c - h for c, h in zip(corral, by_hand, strict=True)]), 3
        ),
        "argv_by_hand": argv,
    }
    return figure, extra


# Idle CPU
def cpu_ticks(pid: int) -> tuple[int, int]:
    """(utime + stime, cutime + cstime) of ``pid`` in clock ticks."""
    data = Path(f"/proc/{pid}/stat").read_bytes()
    fields = data[data.rindex(b")") + 2 :].split()  # from field 3, the state, on
    utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
    return utime + stime, cutime + cstime


def daemon_pid(cluster: TestCluster, daemon: str) -> int:
    return int(cluster.paths.pid_file(daemon).read_text().strip())


def start_idle_guests(cluster: TestCluster, count: int) -> list[int]:
    """Start ``count`` guests at once (one SubmitManyJobs), each up to its
    READY line (acpid listening, the shell next); returns their QEMU pids."""
    names = [f"idle{i}" for i in range(count)]
    for name in names:
        add_guest(cluster, name)
    layout = Layout(cluster.paths.run_dir)
    layout.ensure()
    watch = SocketWatch(layout.base / "ctrl")
    try:
        sessions = [watch.expect(name) for name in names]
        with cluster.client() as client:
            jobs = [[{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": n}] for n in names]
            statuses = wait_all_final(client, submit_many(client, jobs), WAIT)
        if set(statuses) != {"success"}:
            raise RuntimeError(f"starting the idle guests: {statuses}")
        for session in sessions:
            session.wait_for(READY, WAIT)
            session.close()  # nobody watches an idle guest's console
    finally:
        watch.close()
    pids = []
    for name in names:
        runtime = layout.read_runtime(name)
        if runtime is None:
            raise RuntimeError(f"{name} has no runtime file")
        pids.append(runtime.pid)
    return pids


def share(before: int, after: int, seconds: float) -> float:
    """CPU ticks used over ``seconds`` as a percentage of one core."""
    return (after - before) / TICKS / seconds * 100


def idle_window(pids: dict[str, int], qemus: list[int], seconds: float) -> dict[str, Any]:
    """Each process's CPU share over one window of ``seconds``."""
    before = {name: cpu_ticks(pid) for name, pid in pids.items()}
    qemu_before = sum(cpu_ticks(pid)[0] for pid in qemus)
    start = time.monotonic()
    time.sleep(seconds)  # the measurement window itself: the daemons are left alone
    wall = time.monotonic() - start
    after = {name: cpu_ticks(pid) for name, pid in pids.items()}
    qemu_after = sum(cpu_ticks(pid)[0] for pid in qemus)
    return {
        "seconds": round(wall, 2),
        "own_pct": {n: round(share(before[n][0], after[n][0], wall), 3) for n in pids},
        "children_pct": {n: round(share(before[n][1], after[n][1], wall), 3) for n in pids},
        "qemu_total_pct": round(share(qemu_before, qemu_after, wall), 2),
        "qemu_per_guest_pct": round(share(qemu_before, qemu_after, wall) / len(qemus), 2),
        # Their whole lives' CPU: the pids are the daemons that did the work.
        "cpu_s_since_start": {n: round(after[n][0] / TICKS, 2) for n in pids},
    }


def idle(args: argparse.Namespace) -> tuple[Figure, dict[str, Any]]:
    figure = Figure(
        "kvm_idle_daemons_cpu",
        f"masterd + noded CPU, {IDLE_GUESTS} idle kvm guests",
        "% of a core",
        1.0,
        "max",
        "not measured",
    )
    windows = []
    with kvm_cluster("kb") as cluster:
        qemus = start_idle_guests(cluster, IDLE_GUESTS)
        pids = {d: daemon_pid(cluster, d) for d in (*DAEMONS, *INFO_DAEMONS)}
        for run in range(args.runs):
            window = idle_window(pids, qemus, args.idle_seconds)
            windows.append(window)
            figure.runs.append(sum(window["own_pct"][d] for d in DAEMONS))
            print(f"window {run + 1}: {window}", flush=True)
    qemu = [w["qemu_per_guest_pct"] for w in windows]
    extra = {"windows": windows, "qemu_per_guest_median_pct": round(median(qemu), 2)}
    return figure, extra


def main() -> None:
    parser = arg_parser(__doc__ or NAME)
    parser.add_argument(
        "--idle-seconds", type=float, default=IDLE_SECONDS, help="length of one idle window"
    )
    parser.add_argument("--only", choices=("startup", "idle"), help="measure only this figure")
    args = parser.parse_args()
    ensure_bytecode()
    load = [round(x, 2) for x in os.getloadavg()]
    figures, extra = [], {}
    if args.only in (None, "startup"):
        figure, extra["startup"] = startup(args)
        figures.append(figure)
    if args.only in (None, "idle"):
        figure, extra["idle"] = idle(args)
        figures.append(figure)
    params = {"runs": args.runs, "idle_seconds": args.idle_seconds, "idle_guests": IDLE_GUESTS}
    write_results(NAME, figures, params, {"loadavg_at_start": load, **extra})


if __name__ == "__main__":
    main()
