"""Eight clients at once on overlapping instance names: every acknowledged
change is in the cluster at the end, no job fails with an internal error,
and ``gnt-cluster verify`` is clean (``bench/bench_concurrent_jobs.py`` runs
the same workload for a minute and reports its figures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cluster import running_cluster
from tests.helpers.workload import run_workload


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_random_concurrent_workload_loses_no_update(tmp_path: Path, seed: int) -> None:
    with running_cluster(tmp_path) as cl:
        report = run_workload(cl, clients=8, ops_per_client=30, seed=seed)
    assert report.problems() == []
    # The workload did what it is for: jobs succeeded and jobs were refused.
    assert report.succeeded > 60 and report.errors()["OpPrereqError"] > 10, report.errors()
