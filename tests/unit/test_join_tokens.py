"""The master's join tokens: a join holds its token while it runs, uses it
up only when it succeeds, gives it back when it fails; two joins never
share one, also when they try at the same moment."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from corral import errors
from corral.master import join_tokens
from corral.node import join_protocol as J
from corral.paths import Paths


@pytest.fixture
def token(tmp_path: Path) -> tuple[str, str]:
    """(root, token id) of a fresh token."""
    Paths(tmp_path).data_dir.mkdir(parents=True)
    text = join_tokens.create(str(tmp_path), "0" * 64)
    return str(tmp_path), J.parse_token(text).token_id


def refused(call: Callable[..., object], *args: object, text: str) -> None:
    with pytest.raises(errors.OpPrereqError, match=text):
        call(*args)


def test_a_failed_join_gives_the_token_back(token: tuple[str, str]) -> None:
    root, token_id = token
    join_tokens.reserve(root, token_id, "join-a")
    join_tokens.release(root, token_id, "join-a")
    join_tokens.reserve(root, token_id, "join-b")
    join_tokens.use(root, token_id, "join-b")
    refused(join_tokens.key_of, root, token_id, text="was used already")
    refused(join_tokens.reserve, root, token_id, "join-c", text="was used already")


def test_a_held_token_is_refused_to_other_joins(token: tuple[str, str]) -> None:
    root, token_id = token
    join_tokens.reserve(root, token_id, "join-a")
    for call, args in (
        (join_tokens.key_of, (root, token_id)),
        (join_tokens.reserve, (root, token_id, "join-b")),
        (join_tokens.use, (root, token_id, "join-b")),
    ):
        refused(call, *args, text="in use by another join")
    join_tokens.release(root, token_id, "join-b")  # not its own: nothing happens
    refused(join_tokens.key_of, root, token_id, text="in use by another join")
    join_tokens.use(root, token_id, "join-a")


def test_a_lapsed_hold_frees_the_token(
    token: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, token_id = token
    monkeypatch.setattr(join_tokens, "RESERVE_TTL", -1.0)  # a master that died mid-join
    join_tokens.reserve(root, token_id, "join-a")
    join_tokens.reserve(root, token_id, "join-b")
    join_tokens.use(root, token_id, "join-b")


def test_joins_at_the_same_moment_get_it_once(token: tuple[str, str]) -> None:
    root, token_id = token
    start = threading.Barrier(8)
    won: list[str] = []

    def join(holder: str) -> None:
        start.wait()
        try:
            join_tokens.reserve(root, token_id, holder)
        except errors.OpPrereqError:
            return
        join_tokens.use(root, token_id, holder)
        won.append(holder)

    threads = [threading.Thread(target=join, args=(f"join-{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(won) == 1
