"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.unit.jobqueue_helpers import QueueHarness


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[QueueHarness]:
    h = QueueHarness(tmp_path)
    yield h
    await h.close()
