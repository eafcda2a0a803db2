"""The records of operations under way (corral.cmdlib.intents): one format
with a kind per operation, kept in masterd's durable state (the records an
older Corral wrote as files: tests/unit/test_durable_state.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from corral.cmdlib import intents
from corral.disk_description import DiskDescription
from corral.services.context import Master
from corral.services.durable import DurableState
from corral.storage_names import DT_FILE


def master_of(state: DurableState) -> Master:
    """As much of masterd as the records need."""
    return cast(Master, SimpleNamespace(durable=state))


async def test_each_kind_round_trips(durable: DurableState) -> None:
    master = master_of(durable)
    move = intents.Intent(
        "u1", "inst1", "n2", "fake", (DiskDescription(DT_FILE, ("loop", "/d"), 1, "d").to_wire(),),
        kind=intents.MOVE, source="n1", restart=True, transfer="t" * 32,
    )  # fmt: skip
    export = intents.Intent("u2", "inst2", "n2", "fake", kind=intents.EXPORT, export="inst2")
    written = [await intents.write(master, it) for it in (move, export)]
    assert written[0].startswith("intents/u1.move.")
    assert written[1].startswith("intents/u2.export.")
    assert [it for _, it in intents.pending(durable)] == [move, export]
    for key in written:
        intents.drop(master, key)
    assert intents.pending(durable) == []


async def test_a_record_rewritten_in_place(durable: DurableState) -> None:
    master = master_of(durable)
    it = intents.Intent("u3", "inst3", "n2", "fake", kind=intents.FAILOVER, phase=intents.STOPPING)
    key = await intents.write(master, it)
    later = intents.Intent(
        "u3", "inst3", "n2", "fake", kind=intents.FAILOVER, phase=intents.STARTING
    )
    assert await intents.write(master, later, key) == key
    assert intents.pending(durable) == [(key, later)]


async def test_unreadable_records_are_kept(durable: DurableState) -> None:
    await durable.put("intents/broken", {"uuid": "u5"})
    assert intents.pending(durable) == []
    assert durable.get("intents/broken") == {"uuid": "u5"}
