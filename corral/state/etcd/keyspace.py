"""One cluster's keys in etcd: their prefix, the fence every write compares,
and writes split to fit etcd's request limits.

Fencing as the SQLite stores do it (``corral.state.sqlite.fencing``): one
key holds the newest fence token that wrote; a write compares it in the
same transaction (the stored token must not be newer than the writer's) and
raises it to the writer's token when that is newer.  Acquiring the
mastership raises it too, so the writes of a master whose lease passed on
are refused from the moment the new master holds it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from corral import errors
from corral.state.etcd import client as etcd
from corral.state.etcd.client import EtcdClient, TxnResult
from corral.state.ports import deposed

# What a single transaction may carry: etcd's limits, less room for the
# operations every write adds (the fence, a serial...) and for framing.
OPS_PER_TXN = etcd.MAX_TXN_OPS - 4
BYTES_PER_TXN = etcd.MAX_REQUEST_BYTES - 64 * 1024

log = logging.getLogger(__name__)
dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def encode(value: Any) -> bytes:
    return dumps(value).encode()


def pad(number: int) -> str:
    """``number`` as a key part or a value that sorts as numbers do."""
    return f"{number:020d}"


class TooLarge(errors.ConfigurationError):
    """One write is larger than etcd takes in a request."""


class Keyspace:
    """The keys under ``prefix`` (ending in "/") and writes fenced by token."""

    def __init__(self, client: EtcdClient, prefix: str) -> None:
        if not prefix.endswith("/"):
            raise errors.ProgrammerError(f"An etcd key prefix ends with '/': {prefix!r}")
        self.client = client
        self.prefix = prefix
        self.fence_key = prefix + "fence"
        self._known_fence = -1  # the stored fence is at least this (it never goes down)

    def key(self, *parts: str) -> str:
        return self.prefix + "/".join(parts)

    async def write(
        self,
        fence: int,
        what: str,
        compares: Sequence[dict[str, Any]],
        success: Sequence[dict[str, Any]],
        failure: Sequence[dict[str, Any]] = (),
    ) -> TxnResult:
        """One transaction: ``success`` if the fence and ``compares`` hold, else
        ``failure`` (the answer says which ran).  FencedOut if a writer with a
        newer token wrote before."""
        while True:
            fence_ops = (
                [] if fence <= self._known_fence else [etcd.put(self.fence_key, _raw(fence))]
            )
            result = await self.client.txn(
                [etcd.compare(self.fence_key, "VALUE", "LESS", _raw(fence + 1)), *compares],
                [*fence_ops, *success],
                [etcd.get(self.fence_key), *failure],
            )
            if result.succeeded:
                self._known_fence = max(self._known_fence, fence)
                return TxnResult(True, result.revision, result.responses[len(fence_ops) :])
            stored = result.kvs(0)
            if not stored:  # a new keyspace: no fence yet
                await self._create_fence()
                continue
            newest = int(stored[0].value)
            self._known_fence = max(self._known_fence, newest)
            if newest > fence:
                refused = deposed(what, newest, fence)
                # One line per refused write: the fault tests count a deposed master's.
                log.warning("Write refused: %s", refused.message)
                raise refused
            return TxnResult(False, result.revision, result.responses[1:])

    def raise_fence(self, token: int) -> dict[str, Any]:
        """The operation that makes ``token`` the newest fence (a new master's)."""
        self._known_fence = max(self._known_fence, token)
        return etcd.put(self.fence_key, _raw(token))

    async def _create_fence(self) -> None:
        await self.client.txn(
            [etcd.compare(self.fence_key, "CREATE", "EQUAL", 0)],
            [etcd.put(self.fence_key, _raw(0))],
        )

    async def read(self, *ops: dict[str, Any]) -> TxnResult:
        """Several reads at one revision (a transaction of reads only)."""
        return await self.client.txn([], list(ops))


def _raw(token: int) -> bytes:
    return pad(token).encode()


def batches(groups: Sequence[Sequence[dict[str, Any]]]) -> Iterator[list[int]]:
    """The indexes of ``groups`` (each a list of operations that must go in one
    transaction) packed in order into transactions within etcd's limits.
    TooLarge if one group alone does not fit."""
    batch: list[int] = []
    ops = size = 0
    for index, group in enumerate(groups):
        group_size = sum(etcd.op_size(op) for op in group)
        if len(group) > OPS_PER_TXN or group_size > BYTES_PER_TXN:
            raise TooLarge(
                f"A write of {len(group)} operations and {group_size} bytes is larger than"
                f" etcd takes in one request ({OPS_PER_TXN} operations,"
                f" {BYTES_PER_TXN} bytes)"
            )
        if batch and (ops + len(group) > OPS_PER_TXN or size + group_size > BYTES_PER_TXN):
            yield batch
            batch, ops, size = [], 0, 0
        batch.append(index)
        ops += len(group)
        size += group_size
    if batch:
        yield batch
