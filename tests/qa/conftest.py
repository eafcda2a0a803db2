"""The whole QA suite runs only when asked for (``-m qa_full``, as CI does)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "qa_full" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="Ganeti's whole QA suite runs with -m qa_full (CI does)")
    for item in items:
        if "qa_full" in item.keywords:
            item.add_marker(skip)
