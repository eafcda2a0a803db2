"""Fixtures of the conformance suite: Ganeti 3.0.2's package, a Corral cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.ganeti import check_python_deps, ganeti_tree
from tests.helpers.cluster import TestCluster, running_cluster


@pytest.fixture(scope="session")
def ganeti() -> Path:
    """Ganeti's unpacked tree; a missing package or dependency fails the tests."""
    tree = ganeti_tree()
    check_python_deps()
    return tree


@pytest.fixture(scope="module")
def gcluster(ganeti: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    """A running Corral cluster shared by a module's conformance tests."""
    with running_cluster(tmp_path_factory.mktemp("conformance")) as cl:
        yield cl
