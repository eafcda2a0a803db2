"""The master's join tokens: a join holds its token while it runs, uses it
up only when it succeeds, gives it back when it fails; two joins never
share one, also when they try at the same moment; the secret is never kept."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from corral import errors
from corral.node import join_protocol as J
from corral.services import join_tokens
from corral.services.durable import DurableState


@pytest.fixture
async def token_id(durable: DurableState) -> str:
    return J.parse_token(await join_tokens.create(durable, "0" * 64)).token_id


async def refused(call: Callable[[], Awaitable[object] | object], text: str) -> None:
    with pytest.raises(errors.OpPrereqError, match=text):
        result = call()
        if asyncio.iscoroutine(result):
            await result


async def test_a_failed_join_gives_the_token_back(durable: DurableState, token_id: str) -> None:
    await join_tokens.reserve(durable, token_id, "join-a")
    await join_tokens.release(durable, token_id, "join-a")
    await join_tokens.reserve(durable, token_id, "join-b")
    await join_tokens.use(durable, token_id, "join-b")
    await refused(lambda: join_tokens.key_of(durable, token_id), "was used already")
    await refused(lambda: join_tokens.reserve(durable, token_id, "join-c"), "was used already")


async def test_a_held_token_is_refused_to_other_joins(durable: DurableState, token_id: str) -> None:
    await join_tokens.reserve(durable, token_id, "join-a")
    for call in (
        lambda: join_tokens.key_of(durable, token_id),
        lambda: join_tokens.reserve(durable, token_id, "join-b"),
        lambda: join_tokens.use(durable, token_id, "join-b"),
    ):
        await refused(call, "in use by another join")
    await join_tokens.release(durable, token_id, "join-b")  # not its own: nothing happens
    await refused(lambda: join_tokens.key_of(durable, token_id), "in use by another join")
    await join_tokens.use(durable, token_id, "join-a")


async def test_a_lapsed_hold_frees_the_token(
    durable: DurableState, token_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(join_tokens, "RESERVE_TTL", -1.0)  # a master that died mid-join
    await join_tokens.reserve(durable, token_id, "join-a")
    await join_tokens.reserve(durable, token_id, "join-b")
    await join_tokens.use(durable, token_id, "join-b")


async def test_joins_at_the_same_moment_get_it_once(durable: DurableState, token_id: str) -> None:
    won: list[str] = []

    async def join(holder: str) -> None:
        try:
            await join_tokens.reserve(durable, token_id, holder)
        except errors.OpPrereqError:
            return
        await join_tokens.use(durable, token_id, holder)
        won.append(holder)

    await asyncio.gather(*(join(f"join-{i}") for i in range(8)))
    assert len(won) == 1


async def test_unknown_and_expired_tokens_are_refused(durable: DurableState) -> None:
    await refused(lambda: join_tokens.key_of(durable, "nope"), "not made by this cluster")
    await refused(lambda: join_tokens.key_of(durable, 42), "not made by this cluster")
    expired = J.parse_token(await join_tokens.create(durable, "0" * 64, ttl=-1)).token_id
    await refused(lambda: join_tokens.key_of(durable, expired), "has expired")


async def test_only_the_secret_s_hash_is_stored(durable: DurableState, tmp_path: Path) -> None:
    text = await join_tokens.create(durable, "0" * 64)
    token = J.parse_token(text)
    await durable.close()
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("state.db*"))
    with sqlite3.connect(tmp_path / "state.db") as db:
        stored += repr(db.execute("SELECT * FROM kv").fetchall()).encode()
    assert token.token_id.encode() in stored
    for secret in (token.secret, token.secret.hex().encode(), text.split(".")[2].encode()):
        assert secret not in stored
