"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from corral.services.durable import DurableState
from corral.state.sqlite.kv import SqliteKeyValueStore
from tests.unit.jobqueue_helpers import QueueHarness


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[QueueHarness]:
    h = QueueHarness(tmp_path)
    yield h
    await h.close()


@pytest.fixture
async def durable(tmp_path: Path) -> AsyncIterator[DurableState]:
    """masterd's durable state over a fresh ``state.db``."""
    state = await DurableState.open(SqliteKeyValueStore(tmp_path / "state.db"))
    yield state
    await state.close()
