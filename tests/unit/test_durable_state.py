"""masterd's durable state (corral.services.durable): answered from memory,
written in order and durable when a write returns, a failed write undone in
memory; its flags; the state files of an older Corral moved into it."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from corral import errors
from corral.cmdlib import intents
from corral.master import legacy_state
from corral.paths import Paths
from corral.services import durable_flags, join_tokens
from corral.services.durable import WATCHER_PAUSE, DurableState
from corral.state.ports import FencedOut
from corral.state.sqlite.kv import SqliteKeyValueStore, SqliteMastership
from corral.storage_names import DT_FILE


async def reopen(tmp_path: Path) -> DurableState:
    return await DurableState.open(SqliteKeyValueStore(tmp_path / "state.db"))


class HeldPuts:
    """The store's puts wait, once they reached it, until :meth:`release`."""

    def __init__(self, kv: SqliteKeyValueStore) -> None:
        self._gate = asyncio.Event()
        self._arrived: asyncio.Queue[str] = asyncio.Queue()
        stored = kv.put

        async def held(key: str, value: object, fence: int, expected: int | None = None) -> int:
            self._arrived.put_nowait(key)
            await self._gate.wait()
            return await stored(key, value, fence, expected)

        kv.put = held  # type: ignore[method-assign]

    async def reached(self, count: int) -> None:
        """Until ``count`` puts reached the store."""
        for _ in range(count):
            await asyncio.wait_for(self._arrived.get(), 10)

    def release(self) -> None:
        self._gate.set()


async def test_writes_are_durable_and_read_from_memory(
    durable: DurableState, tmp_path: Path
) -> None:
    await durable.put("a/1", {"x": 1})
    await durable.put("a/2", [2])
    await durable.put("b/1", True)
    await durable.delete("a/2")
    assert durable.scan("a/") == {"a/1": {"x": 1}}
    again = await reopen(tmp_path)
    try:
        assert again.scan("") == {"a/1": {"x": 1}, "b/1": True}
    finally:
        await again.close()


async def test_writes_reach_the_store_in_the_order_they_were_made(
    durable: DurableState, tmp_path: Path
) -> None:
    # A forget (from synchronous code) queued before a put of the same key
    # must not remove what the put wrote after it.
    await durable.put("k", 1)
    durable.forget("k")
    await asyncio.gather(durable.put("k", 2), durable.put("other", 3))
    await durable.close()
    again = await reopen(tmp_path)
    try:
        assert again.scan("") == {"k": 2, "other": 3}
    finally:
        await again.close()


async def test_a_failed_write_is_undone_in_memory(tmp_path: Path) -> None:
    mastership = SqliteMastership(tmp_path / "state.db")
    old = await mastership.acquire("old", 60)
    await mastership.release(old)
    new = await mastership.acquire("new", 60)
    newer = await DurableState.open(SqliteKeyValueStore(tmp_path / "state.db"), new.token)
    await newer.put("other", 1)  # a newer master wrote: the old token is fenced out
    await newer.close()
    state = await DurableState.open(SqliteKeyValueStore(tmp_path / "state.db"), old.token)
    try:
        with pytest.raises(FencedOut):
            await state.put("k", 1)
        assert state.get("k") is None
    finally:
        await state.close()
        await mastership.close()


async def test_clients_are_shown_only_what_the_store_holds(tmp_path: Path) -> None:
    # A master that shows a value before the store has it, then dies, has
    # shown what its successor does not have (found by test_mastership_faults).
    kv = SqliteKeyValueStore(tmp_path / "state.db")
    state = await DurableState.open(kv)
    held = HeldPuts(kv)
    try:
        writing = asyncio.create_task(durable_flags.set_watcher_pause(state, 4102444800))
        drain = asyncio.create_task(durable_flags.set_drained(state, True))
        await held.reached(1)  # the first holds the second back: writes go in order
        assert state.get(WATCHER_PAUSE) == 4102444800  # masterd's own checks
        assert durable_flags.watcher_paused_until(state) is None  # not shown yet
        assert not durable_flags.drained(state)
        held.release()
        await asyncio.gather(writing, drain)
        assert durable_flags.watcher_paused_until(state) == 4102444800
        assert durable_flags.drained(state)
    finally:
        held.release()
        await state.close()


async def test_a_caller_that_goes_leaves_its_write_to_end(tmp_path: Path) -> None:
    # masterd stopping cancels the luxi calls under way: their writes end all
    # the same, and closing waits for them (it raised CancelledError: found by
    # test_mastership_faults, where a deposed master stood by again).
    kv = SqliteKeyValueStore(tmp_path / "state.db")
    state = await DurableState.open(kv)
    held = HeldPuts(kv)
    caller = asyncio.create_task(state.put("k", 1))
    await held.reached(1)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    held.release()
    await state.close()  # waits for the write, raises nothing
    assert state.committed("k") == 1 and state.get("k") == 1
    again = await reopen(tmp_path)
    try:
        assert again.scan("") == {"k": 1}
    finally:
        await again.close()


async def test_drain_flag_and_watcher_pause(durable: DurableState) -> None:
    assert durable_flags.drained(durable) is False
    await durable_flags.set_drained(durable, True)
    assert durable_flags.drained(durable) is True
    await durable_flags.set_drained(durable, False)
    await durable_flags.set_drained(durable, False)  # idempotent
    assert durable_flags.drained(durable) is False

    until = int(time.time()) + 3600
    assert await durable_flags.set_watcher_pause(durable, until) == until
    assert durable_flags.watcher_paused_until(durable) == until
    await durable_flags.set_watcher_pause(durable, time.time() - 10)
    assert durable_flags.watcher_paused_until(durable) is None  # a past time: no pause
    with pytest.raises(errors.OpPrereqError, match="seconds since the epoch or null"):
        await durable_flags.set_watcher_pause(durable, "soon")
    assert await durable_flags.set_watcher_pause(durable, None) is None


async def test_an_older_corral_s_files_move_in(tmp_path: Path) -> None:
    paths = Paths(tmp_path / "root")
    paths.queue_dir.mkdir(parents=True)
    paths.data_dir.mkdir(parents=True, exist_ok=True)
    paths.queue_drain_file.touch()
    paths.watcher_pause_file.write_text(f"{int(time.time()) + 600}\n")
    entry = {"key": "00" * 32, "expires": time.time() + 600, "used": False}
    (paths.data_dir / "join-tokens.json").write_text(json.dumps({"tok1": entry}))
    records = paths.data_dir / "instance-intents"
    records.mkdir()
    old_add = {"uuid": "u4", "name": "inst4", "node": "n1", "hypervisor": "fake",
               "disks": ["/srv/ganeti/file-storage/inst4/d.file.disk0"]}  # fmt: skip
    (records / "u4.json").write_text(json.dumps(old_add))

    state = await DurableState.open(SqliteKeyValueStore(tmp_path / "state.db"))
    try:
        await legacy_state.move_into(state, paths)
        assert durable_flags.drained(state)
        assert durable_flags.watcher_paused_until(state) is not None
        assert join_tokens.key_of(state, "tok1") == bytes(32)
        ((key, it),) = intents.pending(state)
        # An add record of an older Corral: no kind, a file disk named by its path.
        assert key == "intents/u4" and it.kind == intents.ADD
        assert it.disks[0]["template"] == DT_FILE
        assert it.disks[0]["logical_id"][-1] == old_add["disks"][0]
    finally:
        await state.close()
    assert not paths.queue_drain_file.exists() and not paths.watcher_pause_file.exists()
    assert not records.exists()
    assert not (paths.data_dir / "join-tokens.json").exists()
