"""How fast a job change reaches 100 concurrent WaitForJobChange waiters.

The measurement
---------------
*The change* is a new entry in the job's log.  The job is one
OP_TEST_DELAY(duration=D, repeat=R): each of its R iterations first logs
"Test delay iteration i/R-1" and then sleeps D seconds, so one job makes R
changes, D seconds apart.  masterd stamps each log entry with ``time.time()``
when the opcode logs it, just before the entry is written to the store and
the job's subscribers are woken; that stamp (``[seconds, microseconds]`` in
the entry every waiter receives) is the time of the change.

*Receiving it*: 100 waiters, each on its own luxi connection to masterd's
socket (raw asyncio unix sockets in this process, framed and parsed with
``corral.luxi.protocol``), each calling WaitForJobChange(job, ["status"],
previous info, previous log serial) in a loop, as ``gnt-job watch`` does.  A
waiter's receive time is ``time.time()`` when the complete answer has been
read from its socket.  Both stamps come from the same clock of the same
machine, so latency = receive time - entry stamp, one sample per waiter per
change.

Every change is counted only for waiters that were already waiting when it
happened (their request was sent before the entry's stamp): D (0.25 s) is far
longer than a waiter needs to ask again, so in practice all are.  The job
waits behind a 1.5 s "gate" job (``depends``) so that all 100 waiters are
connected and waiting before its first change.

One run is one job: R = 20 changes x 100 waiters = 2,000 samples, from which
p50 and p99 are taken.  The figure is the median over runs of the per-run
p99.  Target: p99 ≤ 50 ms.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import (
    Figure,
    arg_parser,
    bench_cluster,
    delay_op,
    median,
    percentile,
    submit_many,
    wait_all_final,
    write_results,
)
from corral import constants as C
from corral.luxi import protocol

NAME = "wfjc_fanout"
WAITERS = 100
CHANGES = 20
INTERVAL = 0.25
GATE = 1.5


@dataclass
class Waiter:
    """One WaitForJobChange client and what it saw."""

    samples: list[float] = field(default_factory=list)  # seconds, change to receipt
    late: int = 0  # changes that happened before this waiter asked


async def watch(socket_path: Path, job_id: int, waiter: Waiter, armed: asyncio.Event) -> None:
    """Follow the job to its end like ``gnt-job watch``, timing each log entry."""
    reader, writer = await asyncio.open_unix_connection(
        str(socket_path), limit=protocol.MAX_MESSAGE_SIZE
    )
    prev_info: Any = None
    prev_serial = 0
    try:
        while True:
            sent = time.time()
            writer.write(
                protocol.encode_request(
                    "WaitForJobChange", [job_id, ["status"], prev_info, prev_serial, 30.0]
                )
            )
            await writer.drain()
            data = await reader.readuntil(protocol.ETX)
            received = time.time()
            result = protocol.parse_response(data[:-1])
            armed.set()
            if result == "nochange":
                continue
            info, entries = result
            for serial, (sec, usec), _kind, _message in entries:
                stamp = sec + usec / 1e6
                if sent < stamp:
                    waiter.samples.append(received - stamp)
                else:
                    waiter.late += 1
                prev_serial = max(prev_serial, serial)
            prev_info = info
            if info[0] in C.JOB_STATUS_FINALIZED and not entries:
                return
    finally:
        writer.close()


async def one_run(socket_path: Path, job_id: int, waiters: list[Waiter]) -> None:
    events = [asyncio.Event() for _ in waiters]
    tasks = [
        asyncio.create_task(watch(socket_path, job_id, w, e))
        for w, e in zip(waiters, events, strict=True)
    ]
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events)), GATE)
    await asyncio.gather(*tasks)


def main() -> None:
    parser = arg_parser(__doc__ or NAME)
    parser.add_argument("--waiters", type=int, default=WAITERS)
    parser.add_argument("--changes", type=int, default=CHANGES, help="log entries per job")
    args = parser.parse_args()
    p99 = Figure(
        "wfjc_fanout_p99",
        f"Job change to {args.waiters} WaitForJobChange waiters, p99",
        "ms",
        50,
        "max",
        "n/a",
    )
    p50_runs: list[float] = []
    all_samples: list[float] = []
    late = 0
    with bench_cluster(NAME) as cluster, cluster.client() as client:
        for run in range(args.runs):
            gate, job_id = submit_many(
                client,
                [
                    [delay_op(GATE)],
                    [delay_op(INTERVAL, repeat=args.changes, depends=[[-1, []]])],
                ],
            )
            waiters = [Waiter() for _ in range(args.waiters)]
            asyncio.run(one_run(cluster.paths.master_socket, job_id, waiters))
            wait_all_final(client, [gate, job_id])
            samples = [s * 1000 for w in waiters for s in w.samples]
            late += sum(w.late for w in waiters)
            all_samples += samples
            p99.runs.append(percentile(samples, 99))
            p50_runs.append(percentile(samples, 50))
            print(
                f"run {run + 1}: {len(samples)} samples, p50 {p50_runs[-1]:.2f} ms,"
                f" p99 {p99.runs[-1]:.2f} ms, max {max(samples):.2f} ms",
                flush=True,
            )
    expected = args.runs * args.waiters * args.changes
    note = (
        f"median of the runs' p50 {median(p50_runs):.2f} ms;"
        f" {len(all_samples)} samples of {expected} expected ({late} late);"
        f" over all runs p50 {percentile(all_samples, 50):.2f} ms,"
        f" p99 {percentile(all_samples, 99):.2f} ms, max {max(all_samples):.2f} ms"
    )
    p99.notes = note
    print(note)
    write_results(
        NAME,
        [p99],
        {
            "waiters": args.waiters,
            "changes_per_run": args.changes,
            "interval_s": INTERVAL,
            "runs": args.runs,
        },
        {"p50_ms_runs": p50_runs, "p99_ms_runs": p99.runs},
    )


if __name__ == "__main__":
    main()
