"""A first end-to-end check: init, a job, list, destroy."""

from __future__ import annotations

from tests.helpers.cluster import TestCluster


def test_init_job_list_destroy(cluster: TestCluster) -> None:
    result = cluster.gnt("debug", "delay", "0.1")
    assert result.rc == 0, result.stderr
    listing = cluster.gnt("job", "list", "--no-headers")
    lines = [line.split() for line in listing.stdout.splitlines()]
    assert lines == [["1", "success", "CLUSTER_POST_INIT"], ["2", "success", "TEST_DELAY(0.1)"]]
    destroyed = cluster.gnt("cluster", "destroy", "--yes-do-it")
    assert destroyed.rc == 0, destroyed.stderr
    assert not cluster.paths.config_db.exists()
    after = cluster.gnt("job", "list")
    assert after.rc == 5
    assert "Cluster not initialized" in after.stderr
