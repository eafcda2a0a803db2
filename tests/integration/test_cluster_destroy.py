"""gnt-cluster destroy refuses while instances remain, and changes nothing then."""

from __future__ import annotations

from tests.helpers.cluster import TestCluster
from tests.helpers.osdef import make_os


def test_destroy_refuses_while_an_instance_remains(cluster: TestCluster) -> None:
    make_os(cluster.paths, "plain")
    add = cluster.gnt(
        "instance",
        "add",
        "-t",
        "diskless",
        "-o",
        "plain+default",
        "--no-start",
        "--no-name-check",
        "--no-ip-check",
        "keep.example.com",
    )
    assert add.rc == 0, add.stderr
    refused = cluster.gnt("cluster", "destroy", "--yes-do-it")
    assert refused.rc == 1
    assert "There are still 1 instance(s) in this cluster" in refused.stderr
    assert cluster.paths.config_db.exists()
    assert cluster.gnt("instance", "list", "--no-headers").stdout.split()[0] == "keep.example.com"
    assert cluster.gnt("instance", "remove", "-f", "keep.example.com").rc == 0
    assert cluster.gnt("cluster", "destroy", "--yes-do-it").rc == 0
    assert not cluster.paths.config_db.exists()
