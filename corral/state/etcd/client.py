"""A small etcd v3 client: the JSON gRPC gateway over HTTPS (aiohttp), mutual TLS.

No grpc and no etcd3 package (it fails at import with protobuf >= 4): etcd
serves every v3 call as JSON under ``/v3/...`` on its client port, which is
what Patroni uses too.  Keys and values travel base64-encoded, 64-bit numbers
as strings, and fields at their zero value are left out of answers.

A member that cannot be reached is left for the next one; an answer that
never came (the member died, a leader election) leaves a write's outcome
unknown: the call is made again (see :meth:`EtcdClient.call`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import ssl
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from corral import errors

# etcd 3.4's defaults, which the members Corral starts are given (server.py):
# a transaction holds at most 128 operations per branch, a request 1.5 MiB.
MAX_TXN_OPS = 128
MAX_REQUEST_BYTES = 3 * 512 * 1024
# What one request's own framing may cost beyond its keys and values.
OP_OVERHEAD = 32
# Seconds a call keeps trying other members (an election takes ~1-2 s).
CALL_DEADLINE = 10.0
# Seconds one member gets to answer a call before the next is tried (its
# answers take milliseconds; a leader's election, a second or two).
ATTEMPT_TIMEOUT = 2.5
# Keys a range answer holds at most (paged beyond).
RANGE_PAGE = 1000


class EtcdError(errors.ConfigurationError):
    """etcd refused a call, or no member answered."""


class Unreachable(EtcdError):
    """No member could be reached: the call was not made."""


class Indeterminate(EtcdError):
    """A write went out but its answer never came: it may have been applied."""


def b64(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode("ascii")


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


def prefix_end(prefix: str) -> str:
    """The ``range_end`` of every key starting with ``prefix`` (its last byte plus one)."""
    raw = bytearray(prefix.encode())
    while raw and raw[-1] == 0xFF:
        raw.pop()
    if not raw:
        return b64(b"\0")
    raw[-1] += 1
    return b64(bytes(raw))


@dataclass(frozen=True)
class KeyValue:
    """One key as etcd holds it (revisions are etcd's, cluster-wide)."""

    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int

    @classmethod
    def of(cls, raw: dict[str, Any]) -> KeyValue:
        return cls(
            unb64(raw["key"]).decode(),
            unb64(raw.get("value", "")),
            int(raw.get("create_revision", 0)),
            int(raw.get("mod_revision", 0)),
            int(raw.get("version", 0)),
            int(raw.get("lease", 0)),
        )


# Building transactions: plain dicts in the gateway's JSON form.
def put(key: str, value: bytes, lease: int = 0) -> dict[str, Any]:
    request: dict[str, Any] = {"key": b64(key), "value": b64(value)}
    if lease:
        request["lease"] = str(lease)
    return {"request_put": request}


def get(key: str) -> dict[str, Any]:
    return {"request_range": {"key": b64(key)}}


def get_prefix(prefix: str, keys_only: bool = False) -> dict[str, Any]:
    request = {"key": b64(prefix), "range_end": prefix_end(prefix), "keys_only": keys_only}
    return {"request_range": request}


def get_range(start: str, prefix: str) -> dict[str, Any]:
    """The keys under ``prefix`` from ``start`` on."""
    return {"request_range": {"key": b64(start), "range_end": prefix_end(prefix)}}


def delete(key: str) -> dict[str, Any]:
    return {"request_delete_range": {"key": b64(key)}}


def delete_range(start: str, end: str) -> dict[str, Any]:
    """Every key from ``start`` up to, not including, ``end``."""
    return {"request_delete_range": {"key": b64(start), "range_end": b64(end)}}


def compare(key: str, target: str, result: str, value: int | bytes) -> dict[str, Any]:
    """``target`` (VERSION, CREATE, MOD or VALUE) of ``key`` ``result`` (EQUAL,
    GREATER, LESS, NOT_EQUAL) ``value``; on a missing key only a revision
    compare with 0 holds."""
    field = {"VERSION": "version", "CREATE": "create_revision", "MOD": "mod_revision"}
    cmp: dict[str, Any] = {"key": b64(key), "target": target, "result": result}
    if target == "VALUE":
        assert isinstance(value, bytes)
        cmp["value"] = b64(value)
    else:
        cmp[field[target]] = str(value)
    return cmp


def op_size(op: dict[str, Any]) -> int:
    """Roughly the bytes ``op`` adds to a request (keys and values, decoded)."""
    body = next(iter(op.values()))
    return OP_OVERHEAD + sum(len(v) * 3 // 4 for k, v in body.items() if k in ("key", "value"))


@dataclass(frozen=True)
class TxnResult:
    """A transaction's answer: which branch ran, at which revision, its answers."""

    succeeded: bool
    revision: int
    responses: list[dict[str, Any]]

    def kvs(self, index: int) -> list[KeyValue]:
        """The keys the ``index``-th operation (a range) read."""
        answer = self.responses[index].get("response_range", {})
        return [KeyValue.of(raw) for raw in answer.get("kvs", [])]

    def deleted(self, index: int) -> int:
        return int(self.responses[index].get("response_delete_range", {}).get("deleted", 0))


def client_ssl_context(ca: Path, cert: Path, key: Path | None = None) -> ssl.SSLContext:
    """Mutual TLS to the members: present ``cert``, verify their chain and
    address against ``ca`` (member certificates name their IP address)."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert), str(key) if key else None)
    return ctx


class EtcdClient:
    """Calls to one etcd cluster through any of its members' client URLs."""

    def __init__(
        self, endpoints: Sequence[str], tls: ssl.SSLContext, deadline: float = CALL_DEADLINE
    ) -> None:
        """``deadline``: seconds a call keeps trying the members (see :meth:`call`)."""
        self.endpoints: list[str] = []
        self.set_endpoints(endpoints)
        self.deadline = deadline
        self._tls = tls
        self._session: aiohttp.ClientSession | None = None
        self._current = 0

    def set_endpoints(self, endpoints: Sequence[str]) -> None:
        """Call through ``endpoints`` from now on (the members changed)."""
        if not endpoints:
            raise errors.ProgrammerError("An etcd client needs at least one endpoint")
        self.endpoints = list(endpoints)
        self._current = 0

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(ssl=self._tls, limit=32)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=self.deadline)
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to ``path`` on a member that answers; its answer.

        Members are tried in turn until one answers or the client's deadline
        passes; each gets ATTEMPT_TIMEOUT at most, so that a member that
        takes connections but answers nothing (frozen, cut off) does not hold
        every call.  A request whose answer was lost is sent again: the stores
        write so that a repeat is harmless, or is recognised (each write
        carries a nonce).
        After the deadline: Unreachable if no request went out, else
        Indeterminate.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.deadline
        data = json.dumps(body, separators=(",", ":")).encode()
        tries, sent = 0, False
        while True:
            endpoint = self.endpoints[self._current]
            try:
                left = deadline - loop.time()
                return await self._post(endpoint + path, data, min(left, ATTEMPT_TIMEOUT))
            except aiohttp.ClientSSLError as err:  # no other member will do better
                raise EtcdError(f"TLS with etcd at {endpoint} failed: {_describe(err)}") from err
            except aiohttp.ClientConnectorError as err:
                failure: Exception = err
            except (aiohttp.ClientError, TimeoutError, _Unavailable) as err:
                failure, sent = err, True
            tries += 1
            self._current = (self._current + 1) % len(self.endpoints)
            if loop.time() >= deadline:
                what = f"within {self.deadline:g} s (last: {endpoint}, {_describe(failure)})"
                if sent:
                    raise Indeterminate(
                        f"etcd did not answer {path} {what}; the write may have been applied"
                    )
                raise Unreachable(f"No etcd member answered {path} {what}; check the members")
            if tries % len(self.endpoints) == 0:
                await asyncio.sleep(0.05)  # every member failed: let an election end

    async def _post(self, url: str, data: bytes, timeout: float) -> dict[str, Any]:
        async with asyncio.timeout(max(timeout, 0.01)):
            async with self._http().post(url, data=data) as response:
                try:
                    answer: dict[str, Any] = await response.json(content_type=None)
                except ValueError as err:
                    raise EtcdError(f"etcd at {url} answered {response.status}, not JSON") from err
        if "error" not in answer and "code" not in answer:
            return answer
        code, message = int(answer.get("code", 2)), str(answer.get("message", answer))
        if fate_unknown(code, message):
            raise _Unavailable(message)
        raise EtcdError(f"etcd refused the call: {message}")

    # The calls the stores make
    async def range(
        self,
        key: str,
        range_end: str | None = None,
        *,
        revision: int = 0,
        limit: int = 0,
        serializable: bool = False,
    ) -> tuple[list[KeyValue], int, bool]:
        """Keys from ``key`` (to ``range_end``, base64, if given): the keys,
        the revision read and whether more are left.  ``serializable``: the
        answering member's own copy, which may be behind (it needs no quorum)."""
        body: dict[str, Any] = {"key": b64(key), "serializable": serializable}
        if range_end is not None:
            body["range_end"] = range_end
        if revision:
            body["revision"] = str(revision)
        if limit:
            body["limit"] = str(limit)
        answer = await self.call("/v3/kv/range", body)
        kvs = [KeyValue.of(raw) for raw in answer.get("kvs", [])]
        return kvs, int(answer["header"]["revision"]), bool(answer.get("more"))

    async def scan(self, prefix: str, start: str | None = None) -> tuple[list[KeyValue], int]:
        """Every key under ``prefix`` (from ``start`` on), at one revision, in key order."""
        found: list[KeyValue] = []
        key, revision = start or prefix, 0
        while True:
            page, revision, more = await self.range(
                key, prefix_end(prefix), revision=revision, limit=RANGE_PAGE
            )
            found += page
            if not more or not page:
                return found, revision
            key = page[-1].key + "\0"

    async def txn(
        self,
        compares: Sequence[dict[str, Any]],
        success: Sequence[dict[str, Any]],
        failure: Sequence[dict[str, Any]] = (),
    ) -> TxnResult:
        """One transaction: ``success`` if every compare holds, else ``failure``."""
        body = {"compare": list(compares), "success": list(success), "failure": list(failure)}
        answer = await self.call("/v3/kv/txn", body)
        return TxnResult(
            bool(answer.get("succeeded")),
            int(answer["header"]["revision"]),
            answer.get("responses", []),
        )

    async def grant(self, ttl: int) -> int:
        """A new lease of ``ttl`` seconds; its id."""
        answer = await self.call("/v3/lease/grant", {"TTL": str(ttl)})
        return int(answer["ID"])

    async def keepalive(self, lease: int) -> int:
        """Renew ``lease``; the seconds it runs from now (0: it is gone)."""
        async with contextlib.aclosing(
            self.stream("/v3/lease/keepalive", {"ID": str(lease)})
        ) as results:
            async for result in results:
                return int(result.get("TTL", 0))
        return 0

    async def revoke(self, lease: int) -> None:
        try:
            await self.call("/v3/lease/revoke", {"ID": str(lease)})
        except EtcdError as err:
            if "lease not found" not in err.message:
                raise

    async def watch(
        self, key: str, start_revision: int, timeout: float, prefix: bool = False
    ) -> bool:
        """Wait up to ``timeout`` seconds for a change of ``key`` (``prefix``:
        of any key it begins) at or after ``start_revision``; whether one came."""
        request = {"key": b64(key), "start_revision": str(start_revision)}
        if prefix:
            request["range_end"] = b64(prefix_end(key))
        create = {"create_request": request}
        try:
            async with (
                asyncio.timeout(timeout),
                contextlib.aclosing(self.stream("/v3/watch", create, timeout + 1)) as results,
            ):
                async for result in results:
                    if result.get("events") or result.get("compact_revision"):
                        return True
                    if result.get("canceled"):
                        raise EtcdError(f"etcd cancelled a watch: {result.get('cancel_reason')}")
        except TimeoutError:
            return False
        return False

    async def stream(
        self, path: str, body: dict[str, Any], timeout: float = CALL_DEADLINE
    ) -> AsyncGenerator[dict[str, Any], None]:
        """The results of a streaming call, one by one (the gateway sends one JSON
        object per line)."""
        endpoint = self.endpoints[self._current]
        try:
            async with self._http().post(
                endpoint + path, json=body, timeout=aiohttp.ClientTimeout(total=timeout)
            ) as response:
                async for line in response.content:
                    if not line.strip():
                        continue
                    message = json.loads(line)
                    if "error" in message:
                        error = message["error"]
                        raise EtcdError(f"etcd refused {path}: {error.get('message', error)}")
                    yield message.get("result", {})
        except (aiohttp.ClientError, TimeoutError) as err:
            self._current = (self._current + 1) % len(self.endpoints)
            problem = _describe(err)
            raise Unreachable(f"etcd at {endpoint} did not answer {path}: {problem}") from err

    async def status(self, endpoint: str, timeout: float | None = None) -> dict[str, Any]:
        """``/v3/maintenance/status`` of one member (its leader, its revision...),
        within ``timeout`` seconds (default: the client's deadline); Unreachable
        if it does not answer."""
        url = endpoint + "/v3/maintenance/status"
        try:
            return await self._post(url, b"{}", self.deadline if timeout is None else timeout)
        except (aiohttp.ClientError, TimeoutError, _Unavailable) as err:
            raise Unreachable(f"etcd at {endpoint} did not answer: {_describe(err)}") from err

    async def healthy(self, endpoint: str) -> bool:
        """Whether the member at ``endpoint`` serves (it has a leader)."""
        try:
            async with asyncio.timeout(2.0):
                async with self._http().get(endpoint + "/health") as response:
                    answer = await response.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return False
        return bool(answer.get("health") == "true")


# gRPC's codes after which a call may or may not have been carried out:
# canceled, deadline exceeded, unavailable; and unknown or internal when the
# transport under the gateway failed.
_UNKNOWN_FATE = frozenset({1, 4, 14})
_TRANSPORT_FAILED = frozenset({2, 13})


def fate_unknown(code: int, message: str) -> bool:
    """Whether an error answer leaves the call's outcome unknown (it is made
    again): the member gave up waiting, is shutting down, or its gateway lost
    its own gRPC connection to it (a member being stopped answers "transport:
    missing content-type field")."""
    return code in _UNKNOWN_FATE or (code in _TRANSPORT_FAILED and "transport" in message)


class _Unavailable(Exception):
    """The member answered that it could not complete the call now."""


def _describe(err: BaseException) -> str:
    return str(err) or type(err).__name__
