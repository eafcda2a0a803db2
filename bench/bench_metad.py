"""corral-metad answering 100 guests at once (issue 23).

A real corral-metad in a namespace of the benchmark's own, with 100
communication taps (routed veths, 169.254.169.254/32 on each), one instance
published per tap; the 100 guests' ends sit in a second namespace, each socket
bound to its own veth and address.  A round is all 100 guests asking for
``/ganeti/latest/os/parameters.json`` at once, each on a new connection, each
latency taken from the connect to the end of the answer.  The figure is the
p99 of a round, median over the rounds.  The floor, measured in the same run
the same way: the TCP connect alone (the kernel's part, metad not involved).

Target: p99 at most 10 ms.  Ganeti 3.0.2's metad serves one address without
taps; no figure.
"""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
import time
from pathlib import Path

from bench.common import Figure, arg_parser, median, percentile, write_results
from corral.metad import client
from corral.metad.model import METADATA_ADDRESS
from tests.helpers.metad import plug, prepare_node, running_metad, sample
from tests.helpers.netns_thread import NamespaceThread

NAME = "metad"
GUESTS = 100
REQUEST = b"GET /ganeti/latest/os/parameters.json HTTP/1.1\r\nHost: metad\r\n\r\n"


def cpu_ticks(pid: int) -> int:
    """utime + stime of ``pid`` in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def guest(index: int) -> tuple[str, str, str]:
    """Guest ``index``'s tap, its end of the veth and its address."""
    tag = f"cmd{os.getpid()}"
    return f"{tag}n{index}", f"{tag}g{index}", f"169.254.2.{index + 1}"


async def ask(index: int, request: bytes | None) -> float:
    """Milliseconds from the connect to the end of the answer (or of the connect
    alone with no ``request``)."""
    _tap, inside, address = guest(index)
    loop = asyncio.get_running_loop()
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, inside.encode())
        sock.bind((address, 0))
        sock.setblocking(False)
        start = time.perf_counter()
        await loop.sock_connect(sock, (METADATA_ADDRESS, 80))
        if request is not None:
            await loop.sock_sendall(sock, request)
            answer = bytearray()
            while chunk := await loop.sock_recv(sock, 65536):
                answer += chunk
            if not answer.startswith(b"HTTP/1.1 200 "):
                raise RuntimeError(f"guest {index}: {bytes(answer[:80])!r}")
        return (time.perf_counter() - start) * 1000


def round_of(request: bytes | None) -> list[float]:
    """All guests at once (run in the guests' namespace)."""

    async def everyone() -> list[float]:
        return list(await asyncio.gather(*(ask(i, request) for i in range(GUESTS))))

    return asyncio.run(everyone())


def main() -> None:
    parser = arg_parser(__doc__ or NAME, runs=15)
    args = parser.parse_args()
    p99s, medians, floors = [], [], []
    with (
        tempfile.TemporaryDirectory(prefix="bench-metad-") as root,
        NamespaceThread() as node,
        NamespaceThread() as guests,
    ):
        prepare_node(node.name, guests.name)
        for index in range(GUESTS):
            tap, inside, address = guest(index)
            plug(node.name, guests.name, tap, inside, address, metric=index)
        with running_metad(node.name, Path(root)) as paths:
            for index in range(GUESTS):
                tap, _inside, address = guest(index)
                meta = sample(f"guest{index}.example.com", comm_ip=address)
                asyncio.run(client.publish(paths, client.record_of(meta, tap, address)))
            guests.call(round_of, REQUEST)  # warm-up
            metad_pid = int(paths.pid_file("corral-metad").read_text())
            busy = cpu_ticks(metad_pid)
            for _ in range(args.runs):
                floors.append(percentile(guests.call(round_of, None), 99))
                latencies = guests.call(round_of, REQUEST)
                p99s.append(percentile(latencies, 99))
                medians.append(median(latencies))
            busy = cpu_ticks(metad_pid) - busy
    p99 = Figure("p99_ms", f"p99 of {GUESTS} guests asking at once", "ms", 10, "max", "none")
    p99.runs = p99s
    middle = Figure("median_ms", "median of the same requests", "ms", 0, "min", "")
    middle.runs = medians
    floor = Figure("connect_p99_ms", "p99 of the TCP connects alone (floor)", "ms", 0, "min", "")
    floor.runs = floors
    ratio = Figure("p99_vs_connect", "p99 / p99 of the connects alone", "x", 0, "min", "")
    ratio.runs = [median(p99s) / median(floors)]
    cpu = Figure("cpu_us_per_request", "metad's CPU per request", "µs", 0, "min", "")
    # Every round's connects count too (accepted, then closed by the guest).
    cpu.runs = [busy / os.sysconf("SC_CLK_TCK") * 1e6 / (args.runs * GUESTS)]
    cpu.notes = "utime + stime over the measured rounds (connect-only rounds included)"
    figures = [p99, middle, floor, ratio, cpu]
    write_results(NAME, figures, {"runs": args.runs, "guests": GUESTS})


if __name__ == "__main__":
    main()
