"""corral-metad answering 100 guests at once (issue 23).

A real corral-metad in a namespace of the benchmark's own, with 100
communication taps (routed veths, 169.254.169.254/32 on each), one instance
published per tap; the 100 guests' ends sit in a second namespace, each socket
bound to its own veth and address.  A round is all 100 guests asking for
``/ganeti/latest/os/parameters.json`` at once, each on a new connection, each
latency taken from the connect to the end of the answer.  The figure is the
p99 of a round, median over the rounds.  The floor, measured in the same run
the same way: the TCP connects alone (the kernel's and the guests' part, metad
does not answer them).  metad's CPU (``/proc/<pid>/schedstat``) per request
and per bare connection, and the guests' side's own CPU: the guests are one
thread (a plain epoll loop) on the same 2 cores as metad.

Target: p99 at most 10 ms.  Ganeti 3.0.2's metad serves one address without
taps; no figure.  On the shared 2-core machine at load 3 to 5, 7 runs each
interleaved: aiohttp's server p99 21 ms (187 us of CPU per request), corral's
own (corral/metad/listener.py) 4 to 7 ms (58 us, half of it in the kernel),
1.4 times the connects alone.
"""

from __future__ import annotations

import asyncio
import os
import select
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


def cpu_ns(pid: int) -> int:
    """Nanoseconds ``pid`` has run on a CPU (user and system)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def user_ticks(pid: int) -> tuple[int, int]:
    """utime and stime of ``pid`` in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def guest(index: int) -> tuple[str, str, str]:
    """Guest ``index``'s tap, its end of the veth and its address."""
    tag = f"cmd{os.getpid()}"
    return f"{tag}n{index}", f"{tag}g{index}", f"169.254.2.{index + 1}"


class Asker:
    """One guest's connection: connect, send the request, read to the end."""

    def __init__(self, index: int, request: bytes | None) -> None:
        _tap, inside, address = guest(index)
        self.index = index
        self.request = request
        self.sent = False
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, inside.encode())
        self.sock.bind((address, 0))
        self.sock.setblocking(False)
        self.answer = bytearray()
        self.start = time.perf_counter()
        self.sock.connect_ex((METADATA_ADDRESS, 80))  # EINPROGRESS: epoll says when

    def ready(self, poller: select.epoll) -> float | None:
        """Act on the socket's readiness; the latency in ms once done."""
        if not self.sent:  # connected (or failed)
            error = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if error:
                raise OSError(error, f"guest {self.index}: {os.strerror(error)}")
            self.sent = True
            if self.request is not None:
                self.sock.send(self.request)  # a few dozen bytes: the buffer takes them
                poller.modify(self.sock, select.EPOLLIN)
                return None
        elif chunk := self.sock.recv(65536):
            self.answer += chunk
            return None
        elif not self.answer.startswith(b"HTTP/1.1 200 "):
            raise RuntimeError(f"guest {self.index}: {bytes(self.answer[:80])!r}")
        elapsed = (time.perf_counter() - self.start) * 1000
        poller.unregister(self.sock)
        self.sock.close()
        return elapsed


def round_of(request: bytes | None) -> tuple[list[float], float]:
    """All guests at once (run in the guests' namespace), or their connects
    alone without ``request``: the latencies, and the microseconds of CPU the
    guests' side took per guest.  A plain epoll loop: the guests' side is one
    thread on the same 2 cores as metad, and must cost as little as it can."""
    start = time.thread_time()
    latencies: list[float] = []
    with select.epoll() as poller:
        guests = {}
        for index in range(GUESTS):
            conn = Asker(index, request)
            guests[conn.sock.fileno()] = conn
            poller.register(conn.sock, select.EPOLLOUT)
        while len(latencies) < GUESTS:
            for fd, _events in poller.poll():
                latency = guests[fd].ready(poller)
                if latency is not None:
                    latencies.append(latency)
    return latencies, (time.thread_time() - start) / GUESTS * 1e6


def main() -> None:
    parser = arg_parser(__doc__ or NAME, runs=15)
    args = parser.parse_args()
    p99s, medians, floors = [], [], []
    request_cpu: list[float] = []
    connect_cpu: list[float] = []
    client_cpu: list[float] = []
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
            ticks = user_ticks(metad_pid)
            for _ in range(args.runs):
                start = cpu_ns(metad_pid)
                floors.append(percentile(guests.call(round_of, None)[0], 99))
                between = cpu_ns(metad_pid)
                latencies, guests_us = guests.call(round_of, REQUEST)
                client_cpu.append(guests_us)
                connect_cpu.append((between - start) / GUESTS / 1000)
                request_cpu.append((cpu_ns(metad_pid) - between) / GUESTS / 1000)
                p99s.append(percentile(latencies, 99))
                medians.append(median(latencies))
            user, system = (b - a for a, b in zip(ticks, user_ticks(metad_pid), strict=True))
    p99 = Figure("p99_ms", f"p99 of {GUESTS} guests asking at once", "ms", 10, "max", "none")
    p99.runs = p99s
    middle = Figure("median_ms", "median of the same requests", "ms", 0, "min", "")
    middle.runs = medians
    floor = Figure("connect_p99_ms", "p99 of the TCP connects alone (floor)", "ms", 0, "min", "")
    floor.runs = floors
    ratio = Figure("p99_vs_connect", "p99 / p99 of the connects alone", "x", 0, "min", "")
    ratio.runs = [median(p99s) / median(floors)]
    cpu = Figure("cpu_us_per_request", "metad's CPU per request", "µs", 0, "min", "")
    cpu.runs = request_cpu
    cpu.notes = "the whole connection: accept, request, answer, close"
    bare = Figure("cpu_us_per_connect", "metad's CPU per bare connection", "µs", 0, "min", "")
    bare.runs = connect_cpu
    bare.notes = "accepted, closed by the guest without a word: the kernel's part mostly"
    share = Figure("cpu_user_share", "share of metad's CPU in user space", "%", 0, "min", "")
    share.runs = [100 * user / max(1, user + system)]
    guests_cpu = Figure(
        "client_cpu_us", "the guests' CPU per request (one thread)", "µs", 0, "min", ""
    )
    guests_cpu.runs = client_cpu
    guests_cpu.notes = "the benchmark's own epoll loop, one thread on the same 2 cores"
    figures = [p99, middle, floor, ratio, cpu, bare, share, guests_cpu]
    write_results(NAME, figures, {"runs": args.runs, "guests": GUESTS})


if __name__ == "__main__":
    main()
