"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.etcd import (  # noqa: F401  (session etcd clusters, a client of one)
    etcd_one,
    etcd_three,
    etcd_three_client,
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[TestCluster]:
    """A running single-node cluster in a temporary root."""
    with running_cluster(tmp_path) as cl:
        yield cl
