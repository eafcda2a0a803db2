"""Hostile and legitimate clients of corral-rapi, for the slow-client tests and
``bench/bench_rapi_flood.py`` (stdlib only).

Hostile clients send no credentials.  Each kind keeps its number of
connections open, opening a new one whenever the server closes one:

- ``silent``: TCP only, no TLS handshake;
- ``idle``: the TLS handshake, then nothing;
- ``head``: a request head, one byte every ``pace`` seconds;
- ``body``: a POST head announcing 100 kB, then the body one byte every
  ``pace`` seconds.

They check no certificate (so a renewed one does not stop them).

Run as a process of its own (so that it does not share the load generator's
interpreter)::

    python -m tests.helpers.rapi_flood HOST PORT CAFILE --idle 250 --body 250 ...

It prints ``ready`` once every connection is open the first time, then runs
until its standard input closes; it prints ``reopened N`` on the way out.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import ssl
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

KINDS = ("silent", "idle", "head", "body")
HEAD = b"GET /2/info HTTP/1.1\r\nHost: rapi\r\nUser-Agent: slow\r\nX-Padding: " + b"a" * 100000
BODY_HEAD = (
    b"POST /2/instances HTTP/1.1\r\nHost: rapi\r\nContent-Type: application/json\r\n"
    b"Content-Length: 100000\r\n\r\n"
)
# Seconds a hostile client waits before opening again when the server refuses it.
_RETRY = 0.05


@dataclass
class Target:
    """Where corral-rapi is, and how to reach it over TLS."""

    host: str
    port: int
    cafile: str

    def context(self, verify: bool = True) -> ssl.SSLContext:
        """A client context trusting ``cafile``; one trusting anything if not ``verify``."""
        if verify:
            return ssl.create_default_context(cafile=self.cafile)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context

    async def open(
        self, context: ssl.SSLContext | None
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if context is None:
            return await asyncio.open_connection(self.host, self.port)
        return await asyncio.open_connection(
            self.host, self.port, ssl=context, server_hostname=self.host
        )


@dataclass
class Flood:
    """Hostile connections of each kind, kept open."""

    target: Target
    counts: dict[str, int]
    pace: float = 5.0
    reopened: int = 0
    _opened: int = 0
    _all_open: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, stop: Awaitable[object]) -> None:
        """Keep the connections open until ``stop`` completes."""
        context = self.target.context(verify=False)
        tasks = [
            asyncio.create_task(self._keep(kind, context))
            for kind, count in self.counts.items()
            for _ in range(count)
        ]
        if not tasks:
            self._all_open.set()
        try:
            await stop
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def ready(self) -> None:
        """Until every connection has been open once."""
        await self._all_open.wait()

    async def _keep(self, kind: str, context: ssl.SSLContext) -> None:
        first = True
        while True:
            try:
                reader, writer = await self.target.open(None if kind == "silent" else context)
            except (OSError, ssl.SSLError):
                await asyncio.sleep(_RETRY)
                continue
            if first:
                first = False
                self._opened += 1
                if self._opened == sum(self.counts.values()):
                    self._all_open.set()
            else:
                self.reopened += 1
            try:
                await self._hold(kind, reader, writer)
            except (OSError, ssl.SSLError):
                pass
            finally:
                writer.close()

    async def _hold(
        self, kind: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Until the server closes the connection."""
        if kind in ("head", "body"):
            data = HEAD if kind == "head" else BODY_HEAD + b"x" * 100000
            start = 0 if kind == "head" else len(BODY_HEAD)
            writer.write(data[:start])
            for offset in range(start, len(data)):
                if reader.at_eof():
                    return
                writer.write(data[offset : offset + 1])
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.pace):
                        await reader.read(65536)
        else:
            while await reader.read(65536):
                pass


# -- legitimate clients --------------------------------------------------------


@dataclass
class Outcome:
    """One legitimate request: its status (None: no answer) and its latency."""

    status: int | None
    seconds: float
    error: str = ""


async def get(
    target: Target, context: ssl.SSLContext, path: str, auth: str | None, timeout: float
) -> Outcome:
    """GET ``path`` on a new connection (closed afterwards); what came of it."""
    start = time.perf_counter()
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await target.open(context)
            head = f"GET {path} HTTP/1.1\r\nHost: {target.host}\r\nConnection: close\r\n"
            if auth:
                head += f"Authorization: {auth}\r\n"
            writer.write((head + "\r\n").encode())
            answer = await reader.read()
        status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else None
        return Outcome(status, time.perf_counter() - start, "" if status else "no answer")
    except (OSError, ssl.SSLError, TimeoutError, ValueError, IndexError) as err:
        return Outcome(None, time.perf_counter() - start, type(err).__name__)
    finally:
        if writer is not None:
            writer.close()


async def burst(
    target: Target, path: str, auth: str | None, count: int, timeout: float
) -> list[Outcome]:
    """``count`` GETs started at once, each on its own connection."""
    context = target.context()
    return list(
        await asyncio.gather(*(get(target, context, path, auth, timeout) for _ in range(count)))
    )


async def paced(
    target: Target,
    path: str,
    auth: str | None,
    rate: float,
    seconds: float,
    timeout: float,
    sample: Callable[[], None] | None = None,
) -> list[Outcome]:
    """GETs started at ``rate`` a second for ``seconds``, each on its own
    connection, whatever the answers' speed; ``sample`` is called at each start."""
    context = target.context()
    tasks = []
    start = time.perf_counter()
    for index in range(int(rate * seconds)):
        delay = start + index / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if sample is not None:
            sample()
        tasks.append(asyncio.create_task(get(target, context, path, auth, timeout)))
    return list(await asyncio.gather(*tasks))


# -- as a process --------------------------------------------------------------


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="hostile clients of corral-rapi")
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("cafile")
    for kind in KINDS:
        parser.add_argument(f"--{kind}", type=int, default=0)
    parser.add_argument("--pace", type=float, default=5.0)
    return parser.parse_args(argv)


async def _main(opts: argparse.Namespace) -> None:
    flood = Flood(
        Target(opts.host, opts.port, opts.cafile),
        {kind: getattr(opts, kind) for kind in KINDS},
        opts.pace,
    )
    loop = asyncio.get_running_loop()
    stop = loop.run_in_executor(None, sys.stdin.read)  # until stdin closes
    running = asyncio.create_task(flood.run(stop))
    ready = asyncio.create_task(flood.ready())
    await asyncio.wait([ready, running], return_when=asyncio.FIRST_COMPLETED)
    if ready.done():
        print("ready", flush=True)
    else:
        ready.cancel()
    await running
    print(f"reopened {flood.reopened}", flush=True)


def main(argv: list[str] | None = None) -> None:
    opts = _arguments(argv)
    wanted = sum(getattr(opts, kind) for kind in KINDS) + 256
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
    asyncio.run(_main(opts))


if __name__ == "__main__":
    main()
