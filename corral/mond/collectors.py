"""The data collectors Corral has, as Ganeti 3.0.2's mond names and reports them.

A report is Ganeti's ``DCReport``: ``name``, ``version`` (``"B"``: built in),
``format_version``, ``timestamp`` (nanoseconds), ``category`` (null for the
default category), ``kind`` (0: performance, 1: status) and ``data``.

- ``cpu-avg-load`` (default category): the CPU load averaged over the last
  ten minutes, from ``/proc/stat`` sampled every five seconds (as Ganeti's,
  which keeps up to 150 samples); per CPU and in total, in CPUs' worth
  (1.0: one CPU busy all the time).  Ganeti's report averages up to its last
  sample; Corral's reads ``/proc/stat`` once more when asked, so a report
  is current and one made right after noded started has data.
- ``diskstats`` (storage): ``/proc/diskstats``, each device with Ganeti's
  fourteen fields (newer kernels' extra fields are left out, as Ganeti's
  parser knows none of them).

Ganeti's other collectors have no data on a Corral node: ``drbd`` (Corral
has no DRBD), ``lv`` (logical volumes), the Xen ones.  Files are read off
the event loop.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

BUILTIN_VERSION = "B"
KIND_PERF, KIND_STATUS = 0, 1
DEFAULT_CATEGORY = "default"
# Ganeti's C.mondTimeInterval, cpuavgloadBufferSize, cpuavgloadWindowSize.
SAMPLE_INTERVAL = 5.0
BUFFER_SIZE = 150
WINDOW = 600.0

DISKSTATS_FIELDS = (
    "readsNum",
    "mergedReads",
    "secRead",
    "timeRead",
    "writes",
    "mergedWrites",
    "secWritten",
    "timeWrite",
    "ios",
    "timeIO",
    "wIOmillis",
)

# (monotonic seconds, busy ticks of the "cpu" line then of each CPU)
Sample = tuple[float, list[int]]


def report(name: str, category: str | None, kind: int, data: Any) -> dict[str, Any]:
    """A report as Ganeti's mond encodes it (format version 1)."""
    return {
        "name": name,
        "version": BUILTIN_VERSION,
        "format_version": 1,
        "timestamp": time.time_ns(),
        "category": category,
        "kind": kind,
        "data": data,
    }


def parse_stat(text: str) -> list[int]:
    """The busy ticks of each ``cpu`` line of ``/proc/stat`` (the total first):
    all but idle, guest times counted again as Ganeti's collector counts them."""
    loads = []
    for line in text.splitlines():
        if not line.startswith("cpu"):
            break
        values = [int(v) for v in line.split()[1:11]]
        values += [0] * (10 - len(values))
        loads.append(sum(values) - values[3])  # values[3]: idle
    if not loads:
        raise ValueError("no cpu line in /proc/stat")
    return loads


def parse_diskstats(text: str) -> list[dict[str, Any]]:
    """``/proc/diskstats`` as Ganeti's diskstats collector's data."""
    disks = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 3 + len(DISKSTATS_FIELDS):
            continue
        disk: dict[str, Any] = {"major": int(parts[0]), "minor": int(parts[1]), "name": parts[2]}
        disk.update(zip(DISKSTATS_FIELDS, map(int, parts[3:14]), strict=True))
        disks.append(disk)
    return disks


class CpuAvgLoad:
    """Ganeti's ``cpu-avg-load``: samples kept by :meth:`run`, averaged by :meth:`report`."""

    name = "cpu-avg-load"
    category: str | None = None
    kind = KIND_PERF

    def __init__(self, proc: Path = Path("/proc"), clock: Callable[[], float] = time.monotonic):
        self._stat = proc / "stat"
        self._clock = clock
        self.samples: deque[Sample] = deque(maxlen=BUFFER_SIZE)

    def _read(self) -> Sample:
        return self._clock(), parse_stat(self._stat.read_text())

    async def sample(self) -> None:
        """Read ``/proc/stat`` once into the buffer."""
        self.samples.append(await asyncio.to_thread(self._read))

    async def run(self) -> None:
        """Sample every SAMPLE_INTERVAL seconds until cancelled."""
        while True:
            await self.sample()
            await asyncio.sleep(SAMPLE_INTERVAL)

    def average(self, now: Sample) -> dict[str, Any]:
        """The report's data: the load from the oldest sample in the window to ``now``."""
        start = next((s for s in self.samples if s[0] >= now[0] - WINDOW), None)
        seconds = now[0] - start[0] if start is not None else 0.0
        if start is None or seconds <= 0 or len(start[1]) != len(now[1]):
            return {"error": "Time covered by data is not sufficient."}
        ticks = seconds * os.sysconf("SC_CLK_TCK")
        loads = [(new - old) / ticks for old, new in zip(start[1], now[1], strict=True)]
        return {"cpu_number": len(loads) - 1, "cpus": loads[1:], "cpu_total": loads[0]}

    async def report(self) -> dict[str, Any]:
        """The collector's report, averaged up to now."""
        try:
            data = self.average(await asyncio.to_thread(self._read))
        except (OSError, ValueError) as err:
            data = {"error": f"Cannot read {self._stat}: {err}"}
        return report(self.name, self.category, self.kind, data)


class DiskStats:
    """Ganeti's ``diskstats``: ``/proc/diskstats`` when asked."""

    name = "diskstats"
    category: str | None = "storage"
    kind = KIND_PERF

    def __init__(self, proc: Path = Path("/proc")) -> None:
        self._file = proc / "diskstats"

    async def report(self) -> dict[str, Any]:
        """The collector's report, read now."""
        try:
            text = await asyncio.to_thread(self._file.read_text)
            data: Any = parse_diskstats(text)
        except (OSError, ValueError) as err:
            data = {"error": f"Cannot read {self._file}: {err}"}
        return report(self.name, self.category, self.kind, data)


Collector = CpuAvgLoad | DiskStats


def listing(collectors: list[Collector]) -> list[list[Any]]:
    """``/1/list/collectors``: ``[name, category, kind]`` each."""
    return [[c.name, c.category or DEFAULT_CATEGORY, c.kind] for c in collectors]
