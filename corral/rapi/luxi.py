"""An asyncio luxi client with a pool of connections to masterd.

Each call takes an idle connection (or opens one), sends one request and
reads its answer; long calls such as WaitForJobChange simply hold their
connection, so the pool grows with the calls in flight and keeps at most
``keep`` idle connections.  At most ``max_open`` connections are open: more
would overflow masterd's listening backlog in a burst of requests (which
failed them as "connection lost"), so further calls wait their turn; waits
for job changes hold at most ``max_long`` of them, leaving the rest to the
short calls.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from corral import errors
from corral.luxi import protocol

# Largest answer read (a bulk query of many thousands of instances is tens of MB).
_READ_LIMIT = 1 << 30
# Connections to masterd at once (its listening backlog is 100), and of those
# the most that waits for job changes hold.
MAX_OPEN = 64
MAX_LONG = 48
_LONG_CALLS = frozenset({"WaitForJobChange"})


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def call(self, request: bytes) -> bytes:
        self.writer.write(request)
        await self.writer.drain()
        data = await self.reader.readuntil(protocol.ETX)
        return data[:-1]

    def close(self) -> None:
        self.writer.close()


class LuxiPool:
    """Calls masterd's luxi methods over ``address`` (a unix socket path, which
    may be relative: the daemon connects from inside the socket directory)."""

    def __init__(
        self, address: str, keep: int = 16, max_open: int = MAX_OPEN, max_long: int = MAX_LONG
    ) -> None:
        self._address = address
        self._keep = keep
        self._idle: list[_Connection] = []
        self._open = asyncio.Semaphore(max_open)
        self._long = asyncio.Semaphore(max_long)

    async def _connect(self) -> _Connection:
        try:
            reader, writer = await asyncio.open_unix_connection(self._address, limit=_READ_LIMIT)
        except OSError as err:
            raise errors.NoMasterError(
                f"Cannot communicate with the master daemon at {self._address}:"
                f" {err.strerror or err}"
            ) from None
        return _Connection(reader, writer)

    async def call(self, method: str, *args: Any) -> Any:
        """Send one request; return its result or raise the error it carries."""
        request = protocol.encode_request(method, list(args))
        if method in _LONG_CALLS:
            async with self._long, self._open:
                answer = await self._exchange(request)
        else:
            async with self._open:
                answer = await self._exchange(request)
        return protocol.parse_response(answer)

    async def _exchange(self, request: bytes) -> bytes:
        conn = self._idle_connection() or await self._connect()
        try:
            answer = await conn.call(request)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as err:
            conn.close()
            raise errors.NoMasterError(f"Lost connection to the master daemon: {err}") from None
        except BaseException:
            # Cancelled mid-call: the answer would arrive on a reused connection.
            conn.close()
            raise
        if len(self._idle) < self._keep:
            self._idle.append(conn)
        else:
            conn.close()
        return answer

    def _idle_connection(self) -> _Connection | None:
        """An idle connection masterd has not closed: a masterd that stopped
        leading (or restarted) closed them all, and its successor on the
        socket must get the request."""
        while self._idle:
            conn = self._idle.pop()
            if not conn.reader.at_eof() and not conn.writer.is_closing():
                return conn
            conn.close()
        return None

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
            with contextlib.suppress(OSError):
                await conn.writer.wait_closed()

    # The methods RAPI uses, typed.
    async def submit_job(self, ops: list[dict[str, Any]]) -> int:
        return int(await self.call("SubmitJob", ops))

    async def wait_for_job_change(
        self, job_id: int, fields: list[str], prev_info: Any, prev_serial: Any, timeout: float
    ) -> Any:
        return await self.call("WaitForJobChange", job_id, fields, prev_info, prev_serial, timeout)

    async def query_jobs(self, job_ids: list[int] | None, fields: list[str]) -> list[Any]:
        return list(await self.call("QueryJobs", job_ids, fields))

    async def query_classic(
        self, method: str, names: list[str], fields: list[str], use_locking: bool = False
    ) -> list[list[Any]]:
        """QueryInstances, QueryNodes, QueryGroups or QueryNetworks."""
        return list(await self.call(method, names, fields, use_locking))
