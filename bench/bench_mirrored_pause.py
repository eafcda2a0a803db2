"""How long a mirrored guest stands still when its secondary fails (issue 26).

A two-node kvm cluster on loopback (real noded, masterd, QEMU under TCG, the
secondary's ``qemu-storage-daemon`` export with TLS).  The guest writes a
counter to its mirrored disk, each value flushed before it prints it, about
20 a second.  Each run fails the secondary's export and times the longest
gap between two printed values around the failure: the guest paused on the
failed write until masterd committed the copy as outdated and had it go on
(its writes never fail: a failed write would print ``WRITE-FAILED``).  Then
``activate-disks`` resyncs the copy and the next run begins.

- killed (SIGKILL): the gap, target at most 1 s plus one config commit;
- frozen (SIGSTOP): the gap, target at most the watchdog's limit (three
  missed probes a second apart) plus 1 s.

    .venv/bin/python -m bench.bench_mirrored_pause --runs 5
"""

from __future__ import annotations

import os
import re
import signal
import socket
import threading
import time
from pathlib import Path

from bench.common import Figure, arg_parser, median, write_results
from corral.node.hypervisor.kvm.guest_mirrors import WATCHDOG_MISSES, WATCHDOG_PERIOD
from corral.node.hypervisor.kvm.runtime import Layout
from corral.node.storage import qsd
from tests.helpers.cluster import TestCluster
from tests.helpers.instances import add, ok, query
from tests.helpers.kvm_pair import MIRRORED, NODE1, NODE2, kvm_two_nodes
from tests.helpers.noded import Noded
from tests.helpers.tiny_os import TINY_OS
from tests.helpers.writer_guest import WRITER_ARGS

WROTE = re.compile(rb"CORRAL-GUEST-WROTE (\d+)")
FAILED = b"WRITE-FAILED"
# Seconds of steady writing before and after each failure.
STEADY = 2.0


class Writes:
    """The guest's printed values, each with the time it was read."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(str(path))
        self.times: list[float] = []
        self.failed = False
        self._changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        pending = b""
        try:
            while data := self.sock.recv(65536):
                now = time.monotonic()
                pending += data
                *lines, pending = pending.split(b"\n")
                with self._changed:
                    for line in lines:
                        self.failed |= FAILED in line
                        if WROTE.search(line):
                            self.times.append(now)
                    self._changed.notify_all()
        except OSError:
            pass

    def wait(self, count: int, timeout: float = 120) -> None:
        """Until ``count`` values were printed in all."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.times) >= count, timeout):
                raise RuntimeError(f"the guest printed {len(self.times)} values, not {count}")

    def gap_around(self, moment: float) -> float:
        """The longest gap between two printed values spanning ``moment``."""
        with self._changed:
            before = [t for t in self.times if t <= moment]
            after = [t for t in self.times if t > moment]
        return after[0] - before[-1]

    def close(self) -> None:
        self.sock.close()


def _fail_once(cl: TestCluster, node2: Noded, writes: Writes, disk: str, how: int) -> float:
    """One failure of the secondary's export (``how``: the signal); the gap."""
    time.sleep(STEADY)
    export = qsd.running(node2.paths, disk, "nbd")
    assert export is not None
    moment = time.monotonic()
    os.kill(export, how)
    writes.wait(len(writes.times) + 1, timeout=60)
    gap = writes.gap_around(moment)
    time.sleep(STEADY)
    if how == signal.SIGSTOP:
        os.kill(export, signal.SIGCONT)
    out = ok(cl.gnt("instance", "activate-disks", "w1"))
    assert "disks are in sync" in out, out
    return gap


def main() -> None:
    args = arg_parser(__doc__ or "").parse_args()
    killed = Figure(
        "killed_pause", "Guest pause, secondary killed", "s", 1.0, "max", "DRBD: none measured"
    )
    limit = WATCHDOG_MISSES * WATCHDOG_PERIOD + 1.0
    frozen = Figure("frozen_pause", "Guest pause, secondary frozen", "s", limit, "max", "n/a")
    with kvm_two_nodes("bpause", WRITER_ARGS, MIRRORED) as (cl, node2):
        ok(
            add(
                cl, "w1", "-t", "mirrored", "--disk=0:size=16m", "-o", f"{TINY_OS}+default",
                "--no-install", "--no-nics", "-n", f"{NODE1}:{NODE2}", "-B", "memory=128",
            )
        )  # fmt: skip
        [disk] = query(cl, ["disk.uuids"], "w1")["w1"]["disk.uuids"]
        writes = Writes(Layout(cl.paths.run_dir).serial("w1"))
        try:
            writes.wait(20)
            for _ in range(args.runs):
                killed.runs.append(_fail_once(cl, node2, writes, disk, signal.SIGKILL))
                frozen.runs.append(_fail_once(cl, node2, writes, disk, signal.SIGSTOP))
            assert not writes.failed, "the guest saw a failed write"
            steady = [b - a for a, b in zip(writes.times, writes.times[1:], strict=False)]
        finally:
            writes.close()
    write_results(
        "mirrored_pause",
        [killed, frozen],
        {"runs": args.runs, "watchdog_s": WATCHDOG_MISSES * WATCHDOG_PERIOD},
        {"median_gap_between_writes_s": round(median(steady), 3)},
    )


if __name__ == "__main__":
    main()
