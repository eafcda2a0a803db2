"""``gnt-instance move``: Ganeti 3.0.2's command and Corral's ask the same
question and print the same refusals (a one-node cluster: the refusals are
the ones that need no second node)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.compare import assert_same, corral_on_terminal, ganeti_on_terminal
from tests.helpers.cluster import TestCluster, running_cluster
from tests.helpers.osdef import make_os

INSTANCE = "mv1.example.com"


@pytest.fixture(scope="module")
def mcluster(ganeti: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestCluster]:
    with running_cluster(tmp_path_factory.mktemp("move-cli")) as cl:
        make_os(cl.paths, "plain", variants=None)
        result = cl.gnt(
            "instance", "add", "-t", "file", "--disk", "0:size=4m", "-o", "plain",
            "--no-install", "--no-name-check", "--no-ip-check", INSTANCE,
        )  # fmt: skip
        assert result.rc == 0, result.stderr
        yield cl


@pytest.mark.parametrize(
    "argv",
    [
        ["move", "-f", "-n", "node1.example.com", INSTANCE],
        ["move", "-f", "-n", "nosuch.example.com", INSTANCE],
        ["move", "-f", "-n", "node1.example.com", "nosuch.example.com"],
        ["move", "-f", "--compress", "gzip", "-n", "node1.example.com", INSTANCE],
    ],
)
def test_refused_moves(mcluster: TestCluster, argv: list[str]) -> None:
    assert_same(mcluster, ["gnt-instance", *argv])


def test_move_asks_first(mcluster: TestCluster) -> None:
    argv = ["gnt-instance", "move", "-n", "node1.example.com", INSTANCE]
    assert corral_on_terminal(mcluster, argv, "n") == ganeti_on_terminal(mcluster, argv, "n")
